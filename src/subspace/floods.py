"""Whether a workspace floods the server: how long it has had a request waiting for its turn
without a break.

A workspace within its share rarely waits, and when it does its queue soon empties: people
pause between requests. A flood of requests past its share keeps a waiter queued all the
time. Such a workspace's statements then run on niced backends (Context.niced()) when one is
free at once: in Postgres they wait for the other workspaces' statements. In the web process
its Python waits for theirs (Precedence).

Counting only a wait that lasts, not any wait, is what keeps this stable: niced for having
waited once, a workspace held its turn longer and waited again, and between two equal
tenants one of them stayed niced (docs/benchmarks.md, "Two tenants: the background's and the
uploads' statements yield too").
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager

# How long a workspace must have had a request waiting, without a moment with none, to count
# as flooding: a paced crowd of 25 people queues for tens of milliseconds at a time
# (bench/tenants.py's mixed phase); a flood queues all the time.
FLOOD_S = 1.0
# How long in all a flood's request steps aside at its checkpoints while other workspaces'
# requests run in its process: a few searches of theirs. Bounded, so that a flood beside a
# busy workspace still moves, only slower, and holds a niced connection no longer.
STEP_ASIDE_S = 0.05
# How long a flood's request waits for a niced connection before it runs on its usual pool:
# one free is taken at once (psycopg's pool refuses a wait of 0 even then), and nicing a flood
# must make no one wait, the uploads that share those connections included.
NICED_WAIT_S = 0.01


class FloodWatch:
    """Per key, since when it has had a waiter without a break. Thread-safe."""

    def __init__(self, flood_s: float = FLOOD_S) -> None:
        self.flood_s = flood_s
        self._lock = threading.Lock()
        self._waiters: Counter[Hashable] = Counter()
        self._since: dict[Hashable, float] = {}

    @contextmanager
    def asking(self, key: Hashable) -> Iterator[Callable[[], None]]:
        """A request of `key` asks for its turn in the block: the function yielded says it
        had to wait, and it is counted as waiting from then until the block ends."""
        waited = False

        def waits() -> None:
            nonlocal waited
            if not waited:
                with self._lock:  # counted and marked together: an interrupt cannot split them
                    self._waiters[key] += 1
                    self._since.setdefault(key, time.monotonic())
                    waited = True

        try:
            yield waits
        finally:
            if waited:
                with self._lock:
                    self._waiters[key] -= 1
                    if not self._waiters[key]:
                        del self._waiters[key]
                        del self._since[key]

    def flooding(self, key: Hashable) -> bool:
        """Whether `key` has had a request waiting for at least `flood_s`, to this moment."""
        with self._lock:
            since = self._since.get(key)
        return since is not None and time.monotonic() - since >= self.flood_s


class Precedence:
    """Within one process, people's requests before a flood's: each search and transaction
    counts itself `running()` under its workspace, and a flood's niced work, at its
    checkpoints, waits while another workspace's request runs (`step_aside`).

    Niced backends make a flood's statements yield in Postgres; this makes its Python yield.
    The interpreter runs one thread at a time and shares itself evenly among the threads that
    want it, so beside a flood's search a person's search took up to twice its Python's time.
    The Database holds one: requests of one process share one interpreter."""

    def __init__(self) -> None:
        self._running: Counter[Hashable] = Counter()
        self._changed = threading.Condition()
        self.stepped_aside = 0  # checkpoints at which a flood waited (the server's /metrics)

    def runs(self, key: Hashable) -> int:
        """How many requests of `key` run in this process now."""
        with self._changed:
            return self._running[key]

    @contextmanager
    def running(self, key: Hashable) -> Iterator[None]:
        """A request of `key` runs in the block."""
        with self._changed:
            self._running[key] += 1
        try:
            yield
        finally:
            with self._changed:
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
                    self._changed.notify_all()

    def step_aside(self, key: Hashable, most_s: float) -> float:
        """A checkpoint of `key`'s flood: wait while another key's request runs here, at most
        `most_s`. The seconds it waited."""
        with self._changed:
            if not self._others(key):
                return 0.0
            self.stepped_aside += 1
            started = time.monotonic()
            self._changed.wait_for(lambda: not self._others(key), timeout=most_s)
            return time.monotonic() - started

    def _others(self, key: Hashable) -> bool:
        return any(other != key for other in self._running)
