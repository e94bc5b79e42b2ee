"""Progress where no bars show (a pipe, a log, CI): a line per task every few seconds with its
count, rate and time left, and one when it ends."""

from __future__ import annotations

import io

from rich.console import Console

from subspace.progress import Bars, LineProgress, progress_for


def test_a_task_is_told_every_few_seconds_with_its_rate_and_time_left() -> None:
    out = io.StringIO()
    now = [0.0]
    with LineProgress(Console(file=out, width=200), every_s=5, clock=lambda: now[0]) as shown:
        task = shown.add_task("Embedding", total=1_000)
        for _ in range(40):
            now[0] += 0.25
            shown.advance(task, 5)  # 20 a second
        quiet = shown.add_task("Building the lexical index")
        shown.update(quiet, completed=7)
    lines = out.getvalue().splitlines()
    assert lines[:2] == [
        "Embedding: 100 of 1,000 (10 %), 20.0/s, about 45 s left",
        "Embedding: 200 of 1,000 (20 %), 20.0/s, about 40 s left",
    ]
    assert lines[-2:] == [
        "Embedding: 200 of 1,000 (20 %), 20.0/s, done in 10 s",
        "Building the lexical index: 7, done in 0 s",  # too short for a rate
    ]


def test_bars_on_a_terminal_lines_elsewhere() -> None:
    assert isinstance(progress_for(Console(file=io.StringIO(), force_terminal=True)), Bars)
    assert isinstance(progress_for(Console(file=io.StringIO(), force_terminal=False)), LineProgress)
