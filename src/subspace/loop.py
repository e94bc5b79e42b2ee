"""The loop every background worker runs: one round after another until stopped, woken by
its LISTEN channel or a `wake()`, polled in case a notification is missed, and backing off
after a round that failed. A worker says only what one round does (`round()`); background.py
starts each in a thread of its own and stops them all.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod

from subspace.db.notifications import Listener

log = logging.getLogger(__name__)

POLL_S = 2.0  # between rounds without a wake: a missed notification waits at most this
SOONEST_S = 0.05  # the shortest wait a round may ask for, so a loop never spins
RETRY_S = 2.0  # after a failed round, doubled after each failure in a row
MAX_RETRY_S = 60.0


class Loop(ABC):
    """One background worker. `round()` does one round and returns how soon the next one is
    due (None: when woken, or after `POLL_S`); `run()` repeats it until `stop()`.

    A round that raises is logged and counted: the next waits `retry_s`, doubled for each
    failure in a row up to `MAX_RETRY_S`. `closed()` runs once the loop ends.
    """

    name = "loop"  # its thread's name and its logs'
    poll_s = POLL_S
    retry_s = RETRY_S
    # Whether a wake ends a back-off (by default only a stop does: the writes that wake a
    # loop may be what fails).
    wake_cuts_backoff = False

    def __init__(self, dsn: str | None = None, channel: str | None = None) -> None:
        self._dsn, self._channel = dsn, channel
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.failures = 0  # failed rounds in a row

    @abstractmethod
    def round(self) -> float | None:
        """Do one round of work; return the seconds until the next is due, or None."""

    def is_failure(self, exc: BaseException) -> bool:
        """Whether `exc` from a round is a failed round, retried (not an interrupt)."""
        return isinstance(exc, Exception)

    def failed(self, exc: BaseException) -> None:
        """Say that a round failed (by default, log it with its traceback)."""
        log.error("%s round failed; retrying", self.name, exc_info=exc)

    def closed(self) -> None:  # noqa: B027 - a hook: most loops hold nothing to release
        """Release what the loop held, once it has stopped."""

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wake(self) -> None:
        """Start the next round now (unless backing off)."""
        self._wake.set()

    def notified(self, payload: str) -> None:
        """A notification came on the loop's channel (by default: start the next round)."""
        self.wake()

    def stop(self) -> None:
        """Ask the loop to end after the round in hand. Safe to call twice."""
        self._stop.set()
        self._wake.set()

    def run(self) -> None:
        """Round after round until `stop()`."""
        listener = None
        if self._channel is not None and self._dsn is not None:
            listener = Listener(self._dsn, self._channel, self.notified,
                                name=f"{self.name}-listen")  # fmt: skip
            listener.start()
        try:
            while not self._stop.is_set():
                wait = self.step()
                backing_off = self.failures and not self.wake_cuts_backoff
                (self._stop if backing_off else self._wake).wait(wait)
                self._wake.clear()
        finally:
            if listener is not None:
                listener.stop()  # its connection closes before the database goes away
            self.closed()

    def step(self) -> float:
        """One round, a failure logged and counted in `failures`; returns how long to wait
        before the next (after a failure, the back-off)."""
        try:
            due = self.round()
        except BaseException as exc:
            if not self.is_failure(exc):
                raise
            self.failures += 1
            self.failed(exc)
            return pause_s(self.failures, self.retry_s)
        self.failures = 0
        return self.poll_s if due is None else min(self.poll_s, max(SOONEST_S, due))


def pause_s(failures: int, retry_s: float = RETRY_S) -> float:
    """How long to wait after `failures` (one or more) failed rounds in a row."""
    return min(retry_s * 2.0 ** (failures - 1), MAX_RETRY_S)
