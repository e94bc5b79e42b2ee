"""Waking the event streams of a run when it writes a step: one LISTEN connection per server
on runs.STEPS_CHANNEL, which whichever process executes the run NOTIFYs."""

from __future__ import annotations

import asyncio
import threading
from uuid import UUID

from subspace.answers import runs
from subspace.db.notifications import Listener


class StepWaker:
    """One LISTEN connection per server that wakes the streams of a run when it writes a
    step (runs.STEPS_CHANNEL, NOTIFYed by whichever process executes the run)."""

    def __init__(self, dsn: str) -> None:
        self._waiting: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._lock = threading.Lock()
        self._listener = Listener(dsn, runs.STEPS_CHANNEL, self._wake, name="run-steps-listen")

    def start(self) -> None:
        self._listener.start()

    def stop(self) -> None:
        self._listener.stop()

    def watch(self, run_id: UUID) -> asyncio.Event:
        """An event set whenever the run writes a step; call from the stream's loop."""
        event = asyncio.Event()
        with self._lock:
            self._waiting.setdefault(str(run_id), []).append((asyncio.get_running_loop(), event))
        return event

    def unwatch(self, run_id: UUID, event: asyncio.Event) -> None:
        with self._lock:
            left = [w for w in self._waiting.get(str(run_id), []) if w[1] is not event]
            if left:
                self._waiting[str(run_id)] = left
            else:
                self._waiting.pop(str(run_id), None)

    def _wake(self, run_id: str) -> None:
        with self._lock:
            waiting = list(self._waiting.get(run_id, []))
        for loop, event in waiting:
            loop.call_soon_threadsafe(event.set)
