"""Stopping a search its caller no longer waits for.

The palette searches as a person types and drops the answer to every keystroke but the last:
its browser aborts the request, and without this the server would still run the search to
the end, so one typist cost as many searches as keystrokes. A request's `Cancel` is set when
its client goes away (api/cancelling.py): the statement the search has in Postgres is
cancelled at once, and the search stops at its next step (search/steps.py), or leaves the
queue for its workspace's turn (shares.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psycopg

from subspace.db.pool import Conn
from subspace.errors import CallerGone


class Cancel:
    """Set once, from any thread; read by the search's thread. Thread-safe."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._conn: Conn | None = None
        self._on_cancel: list[threading.Condition] = []

    @property
    def is_set(self) -> bool:
        return self._set.is_set()

    def check(self) -> None:
        """Raise CallerGone once the caller has gone."""
        if self._set.is_set():
            raise CallerGone("The search was cancelled: its caller went away.")

    @contextmanager
    def running_on(self, conn: Conn) -> Iterator[None]:
        """Within the block the search's statements run on `conn`: `cancel()` stops the one
        in flight. The connection is given back only after a cancel in progress is sent, so
        a cancel never reaches the next request that borrows it."""
        with self._lock:
            self._conn = conn
            if self._set.is_set():
                self._cancel_statement(conn)
        try:
            yield
        finally:
            with self._lock:
                self._conn = None

    def waking(self, condition: threading.Condition) -> None:
        """A condition the search may wait on (its workspace's turn): woken by `cancel()`."""
        with self._lock:
            self._on_cancel.append(condition)

    def cancel(self) -> None:
        """The caller has gone: stop the statement in flight and wake any wait. Safe to call
        twice."""
        self._set.set()
        with self._lock:  # held: the search cannot give the connection back meanwhile
            if self._conn is not None:
                self._cancel_statement(self._conn)
            conditions = list(self._on_cancel)
        for condition in conditions:
            with condition:
                condition.notify_all()

    @staticmethod
    def _cancel_statement(conn: Conn) -> None:
        # Postgres stops the statement running, if any; one that already finished is left be.
        with suppress(psycopg.Error):
            conn.cancel_safe(timeout=2.0)
