"""The background loop every worker runs: rounds until stopped, a failed round counted and
backed off, a wake starting the next round at once, and `closed()` once at the end."""

from __future__ import annotations

import threading
import time

import pytest

from subspace.loop import MAX_RETRY_S, SOONEST_S, Loop, pause_s


class Scripted(Loop):
    """Each round takes the next of `script`: an exception to raise or a wait to ask for."""

    name = "scripted"

    def __init__(self, script: list[BaseException | float | None]) -> None:
        super().__init__()
        self.script = script
        self.rounds = 0
        self.closings = 0
        self.round_done = threading.Event()

    def round(self) -> float | None:
        self.rounds += 1
        self.round_done.set()
        step = self.script.pop(0) if self.script else None
        if isinstance(step, BaseException):
            raise step
        return step

    def closed(self) -> None:
        self.closings += 1


def test_a_failed_round_is_counted_and_backs_off_longer_each_time() -> None:
    loop = Scripted([RuntimeError("a"), RuntimeError("b"), 0.5, None, 0.0])
    assert loop.step() == pause_s(1) == 2.0
    assert (loop.step(), loop.failures) == (4.0, 2)
    assert (loop.step(), loop.failures) == (0.5, 0)  # a success ends the run of failures
    assert loop.step() == loop.poll_s  # no due time: the poll
    assert loop.step() == SOONEST_S  # never a spin
    assert pause_s(30) == MAX_RETRY_S


def test_an_interrupt_is_not_a_failed_round() -> None:
    loop = Scripted([KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        loop.step()
    assert loop.failures == 0


def test_a_wake_starts_the_next_round_and_stop_ends_the_loop_once() -> None:
    loop = Scripted([])
    loop.poll_s = 60.0  # only a wake can start a second round in time
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    assert loop.round_done.wait(5)
    loop.round_done.clear()
    loop.wake()
    assert loop.round_done.wait(5), "the wake did not start a round"
    loop.stop()
    thread.join(5)
    assert not thread.is_alive()
    assert loop.closings == 1


def test_a_stop_cuts_a_back_off_short() -> None:
    loop = Scripted([RuntimeError("down")] * 10)
    loop.retry_s = 60.0
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    assert loop.round_done.wait(5)
    loop.wake()  # backing off, a wake does not start a round
    time.sleep(0.2)
    assert loop.rounds == 1
    loop.stop()
    thread.join(5)
    assert not thread.is_alive()
