"""LISTEN connections for background loops: a thread that hands each NOTIFY to a callback and
stops the moment it is asked to."""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable

import psycopg

log = logging.getLogger(__name__)

# How long the thread waits for a notification before it looks at the stop flag again; a
# stop never waits this long (it wakes the thread through its socket pair).
IDLE_S = 30.0
RECONNECT_S = 1.0  # between attempts when the notification connection is lost


class Listener:
    """LISTENs on `channel` in a daemon thread and calls `on_notify(payload)` for each
    notification, from that thread. `stop()` returns within milliseconds, having closed the
    connection. Start it once; safe to stop twice."""

    def __init__(
        self, dsn: str, channel: str, on_notify: Callable[[str], None], *, name: str
    ) -> None:
        if not channel.isidentifier():
            raise ValueError(f"expected a channel name that is an identifier, got {channel!r}")
        self._dsn = dsn
        self._channel = channel
        self._on_notify = on_notify
        self._stop = threading.Event()
        # A byte written to one end wakes the thread's select() at once.
        self._stop_reader, self._stop_writer = socket.socketpair()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 3.0) -> None:
        if not self._stop.is_set():
            self._stop.set()
            # The thread wakes at once; were the pair unusable, it would still see the flag
            # within IDLE_S, and a stop must not fail for it.
            with contextlib.suppress(OSError):
                self._stop_writer.send(b"\0")
        if self._thread.is_alive():
            self._thread.join(timeout=timeout_s)
        if not self._thread.is_alive():  # never started, or done: nothing selects on the pair
            self._close_pair()

    def _close_pair(self) -> None:
        """Safe to call twice and from either thread: a closed socket closes no descriptor."""
        self._stop_reader.close()
        self._stop_writer.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._listen()
            except psycopg.Error:
                log.warning("lost the connection listening on %s; reconnecting", self._channel)
                self._stop.wait(RECONNECT_S)
            except Exception:  # whatever else fails, the listening goes on
                log.exception("listening on %s failed; listening again", self._channel)
                self._stop.wait(RECONNECT_S)
        # Asked to stop: the pair is closed here too, for a stop that gave up waiting for us.
        self._close_pair()

    def _listen(self) -> None:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            conn.execute(f"listen {self._channel}")
            while not self._stop.is_set():
                # Whatever already arrived first (read along with an earlier reply), then
                # wait on the socket and the stop signal together.
                for note in conn.notifies(timeout=0):
                    self._deliver(note.payload)
                select.select([conn.fileno(), self._stop_reader.fileno()], [], [], IDLE_S)

    def _deliver(self, payload: str) -> None:
        """One notification to the callback; its failure is logged, and the connection, with
        the notifications after it, is kept."""
        try:
            self._on_notify(payload)
        except Exception:
            log.exception("handling a notification on %s failed", self._channel)
