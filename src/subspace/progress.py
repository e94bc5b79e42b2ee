"""Progress a long command shows: rich's bars on a terminal; elsewhere (a pipe, a log, CI) a
line every few seconds per task with its count, rate and time left, and one when it ends,
since bars print nothing there and a nine-minute reindex looked hung."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from rich.console import Console
from rich.progress import Progress

EVERY_S = 5.0  # between two lines of one task when not on a terminal
MIN_RATE_S = 0.5  # a task shorter than this shows no rate (a count over no time means nothing)


class Tasks(Protocol):
    """What a command reports to: rich's Progress, or LineProgress."""

    def add_task(self, description: str, total: float | None = None) -> Any: ...

    def advance(self, task: Any, advance: float = 1) -> None: ...

    def update(self, task: Any, **fields: Any) -> None: ...


class Shown(Protocol):
    """Tasks shown for as long as a `with` lasts."""

    def __enter__(self) -> Tasks: ...

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> Any: ...


@dataclass
class _Task:
    description: str
    total: float | None
    started: float
    completed: float = 0.0
    said_at: float = 0.0
    ended: bool = False


@dataclass
class LineProgress:
    """Tasks reported as lines on `console`: at most one per task every `every_s`, and one
    when a task reaches its total or the progress ends."""

    console: Console
    every_s: float = EVERY_S
    clock: Callable[[], float] = time.monotonic
    tasks: list[_Task] = field(default_factory=list)

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            for task in self.tasks:
                self._say(task, final=True)

    def add_task(self, description: str, total: float | None = None) -> int:
        now = self.clock()
        self.tasks.append(_Task(description, total, now, said_at=now))
        return len(self.tasks) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        self.update(task, completed=self.tasks[task].completed + advance)

    def update(self, task: int, **fields: Any) -> None:
        entry = self.tasks[task]
        entry.description = fields.get("description", entry.description)
        entry.total = fields.get("total", entry.total)
        entry.completed = fields.get("completed", entry.completed)
        if entry.total is not None and entry.completed >= entry.total:
            self._say(entry, final=True)
        elif self.clock() - entry.said_at >= self.every_s:
            self._say(entry, final=False)

    def _say(self, task: _Task, *, final: bool) -> None:
        if task.ended:
            return
        now = self.clock()
        elapsed = now - task.started
        rate = task.completed / elapsed if elapsed >= MIN_RATE_S else 0.0
        line = f"{task.description}: {task.completed:,.0f}"
        if task.total:
            line += f" of {task.total:,.0f} ({100 * task.completed / task.total:.0f} %)"
        if elapsed >= MIN_RATE_S:
            line += f", {rate:,.1f}/s"
        if final:
            line += f", done in {elapsed:,.0f} s"
            task.ended = True
        elif task.total and rate > 0:
            line += f", about {duration((task.total - task.completed) / rate)} left"
        self.console.print(line, highlight=False, markup=False)
        task.said_at = now


def duration(seconds: float) -> str:
    """'42 s', '12 min', '3.1 h': how long is left, as a person says it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Bars:
    """rich's bars, as Tasks."""

    def __init__(self, console: Console, *, disable: bool = False) -> None:
        self._bars = Progress(console=console, disable=disable)

    def __enter__(self) -> Bars:
        self._bars.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self._bars.__exit__(kind, exc, tb)

    def add_task(self, description: str, total: float | None = None) -> Any:
        return self._bars.add_task(description, total=total)

    def advance(self, task: Any, advance: float = 1) -> None:
        self._bars.advance(task, advance)

    def update(self, task: Any, **fields: Any) -> None:
        self._bars.update(task, **fields)


def progress_for(console: Console, *, disable: bool = False) -> Shown:
    """Bars on a terminal, lines elsewhere; `disable` quiets bars (JSON output)."""
    if console.is_terminal or disable:
        return Bars(console, disable=disable)
    return LineProgress(console)
