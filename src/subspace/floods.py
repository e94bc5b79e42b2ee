"""Whether a workspace floods the server: how long it has had a request waiting for its turn
without a break.

A workspace within its share rarely waits, and when it does its queue soon empties: people
pause between requests. A flood of requests past its share keeps a waiter queued all the
time. Such a workspace's statements then run on niced backends (Context.niced()) when one is
free at once: in Postgres they wait for the other workspaces' statements.

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
# How long a flood's niced work steps aside at one of its checkpoints while people's requests
# run in its process: about one search of theirs. Bounded, so that a flood beside a busy
# workspace still moves, only slower.
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
    """Within one process, people's requests before a flood's: the requests of workspaces not
    flooding count themselves `running()`, and a flood's niced work, at each of its
    checkpoints, waits while any runs (`step_aside`).

    Niced backends make a flood's statements yield in Postgres; this makes its Python yield.
    The interpreter runs one thread at a time and shares itself evenly among the threads that
    want it, so a search beside a flood's search would take twice its time for no fault of
    its own (bench/tenants.py)."""

    def __init__(self) -> None:
        self._running = 0
        self._changed = threading.Condition()
        self.stepped_aside = 0  # checkpoints at which a flood waited (the server's /metrics)

    @property
    def running_now(self) -> int:
        """How many requests of workspaces not flooding run in this process now."""
        with self._changed:
            return self._running

    @contextmanager
    def running(self) -> Iterator[None]:
        """A request of a workspace not flooding runs in the block."""
        with self._changed:
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                if not self._running:
                    self._changed.notify_all()

    def step_aside(self, most_s: float = STEP_ASIDE_S) -> None:
        """A flood's checkpoint: wait while people's requests run here, at most `most_s`."""
        with self._changed:
            if self._running:
                self.stepped_aside += 1
                self._changed.wait_for(lambda: not self._running, timeout=most_s)


# One a process: the interpreter it orders is the process's.
PRECEDENCE = Precedence()
