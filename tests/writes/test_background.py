"""Starting and stopping the background work in one place."""

from __future__ import annotations

import threading

import pytest

from subspace.background import Background


class Loop:
    """A loop that runs until stopped, and whose stop may fail."""

    def __init__(self, *, fails: bool = False) -> None:
        self.fails = fails
        self.stopped = threading.Event()

    def run(self) -> None:
        self.stopped.wait(30)

    def stop(self) -> None:
        self.stopped.set()
        if self.fails:
            raise OSError(9, "Bad file descriptor")


def test_one_failing_stop_does_not_keep_the_others_running(
    caplog: pytest.LogCaptureFixture,
) -> None:
    background = Background()
    loops = {"first": Loop(), "failing": Loop(fails=True), "last": Loop()}
    for name, loop in loops.items():
        background.start_loop(name, loop)
    background.stop()
    assert [name for name, loop in loops.items() if not loop.stopped.is_set()] == []
    assert [t.name for t in background.threads.values() if t.is_alive()] == []
    assert "stopping the failing failed" in caplog.text
