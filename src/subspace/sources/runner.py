"""Keeping sources in sync: where the background work runs (one process, background.py), a
loop per source, started, woken and stopped as sources are added, asked to sync and removed.

A watched folder is synced when the system reports a change under it (inotify, through
watchfiles) and every SUBSPACE_SOURCE_SCAN_S in any case, and at start, which catches up on
what changed while the server was stopped. A mailbox waits in IDLE for new mail where the
server offers it, and is polled otherwise. A round that fails records why on the source and
is retried with a growing pause (loop.Loop's back-off); other sources go on meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from uuid import UUID

import psycopg
from imapclient import IMAPClient

from subspace.config import Settings
from subspace.database import Database
from subspace.db.locks import SOURCE_LOCK_CLASS
from subspace.errors import NotFound
from subspace.loop import Loop
from subspace.models import Actor
from subspace.sources import imap
from subspace.sources.folder import SourceFailed, sync_folder
from subspace.sources.model import (
    SOURCES_CHANNEL,
    SyncedSource,
    all_source_ids,
    get_source,
    record_failed_round,
    record_round,
    sealed_password,
)
from subspace.sources.secrets import KeyProblem, unseal_password

log = logging.getLogger(__name__)

SUPERVISOR_POLL_S = 10.0  # a source added while its notification was missed starts this late
WATCH_DEBOUNCE_MS = 300  # changes within this long of each other make one round
JOIN_S = 10.0
UNWATCHED_SCAN_S = 5.0
PAUSED_WAIT_S = 3600.0  # a paused source is tried again when woken, or after this long
IDLE_BROKEN_WAIT_S = 2.0  # after a wait in IDLE broke, before the round that reconnects


@contextmanager
def sync_lock(dsn: str, source_id: UUID, *, wait: bool) -> Iterator[bool]:
    """Hold the source's sync lock (yields False when another process holds it and `wait`
    is False)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        function = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
        row = conn.execute(
            f"select {function}(%s, hashtext(%s))::text", (SOURCE_LOCK_CLASS, str(source_id))
        ).fetchone()
        held = wait or (row is not None and row[0] == "true")
        try:
            yield held
        finally:
            if held:
                conn.execute(
                    "select pg_advisory_unlock(%s, hashtext(%s))",
                    (SOURCE_LOCK_CLASS, str(source_id)),
                )


class SourceSync:
    """Syncs one source, round by round; a mailbox's connection is kept between rounds."""

    def __init__(self, db: Database, settings: Settings, workspace_id: UUID, source_id: UUID):
        self.db, self.settings = db, settings
        self.workspace_id, self.source_id = workspace_id, source_id
        self.client: IMAPClient | None = None
        self._sealed: bytes | None = None  # the password the client logged in with

    def load(self) -> SyncedSource:
        with self.db.pool.connection() as conn:
            return get_source(conn, self.workspace_id, self.source_id)

    def round(
        self,
        stop: threading.Event | None = None,
        *,
        wait: bool = False,
        reread: bool = False,
        on_wait: Callable[[], None] | None = None,
    ) -> Counter[str] | None:
        """One round; None when another process is syncing the source (and not `wait`:
        then `on_wait` is called before waiting for it) or the source was removed meanwhile.
        Records the outcome on the source; a failure raises SourceFailed."""
        with sync_lock(self.db.dsn, self.source_id, wait=False) as held:
            if held:
                return self._round(stop, reread)
        if not wait:
            return None
        if on_wait is not None:
            on_wait()
        with sync_lock(self.db.dsn, self.source_id, wait=True):
            return self._round(stop, reread)

    def _round(self, stop: threading.Event | None, reread: bool) -> Counter[str] | None:
        source = self.load()
        cx = self.db.context(Actor(source.workspace_id, source.user_id), self.settings)
        try:
            if source.kind == "folder":
                counts = sync_folder(cx, source, stop, reread=reread)
            else:
                counts = imap.sync_mailbox(cx, source, self._client(source), stop)
        except SourceFailed as exc:
            self.close()
            self._record_failure(source, exc.reason, paused=exc.paused)
            raise
        except psycopg.errors.ForeignKeyViolation:
            self.close()
            if self._removed():
                return None  # removed during the round: nothing of it is kept
            raise
        except Exception as exc:
            self.close()  # a connection in an unknown state is not reused
            self._record_failure(source, f"The round failed ({type(exc).__name__}: {exc}).")
            raise
        except BaseException:
            self.close()
            raise
        with self.db.pool.connection() as conn:
            record_round(conn, source, dict(counts))
        return counts

    def _record_failure(self, source: SyncedSource, reason: str, *, paused: bool = False) -> None:
        with self.db.pool.connection() as conn:
            record_failed_round(conn, source, reason, paused=paused)

    def _removed(self) -> bool:
        try:
            self.load()
        except NotFound:
            return True
        return False

    def _client(self, source: SyncedSource) -> IMAPClient:
        with self.db.pool.connection() as conn:
            sealed = sealed_password(conn, source)
        if self.client is not None and sealed != self._sealed:
            self.close()  # a new password: logged in again with it, not with the old one
        if self.client is None:
            if sealed is None:
                raise SourceFailed(
                    "No password is kept for this mailbox: give it again.", paused=True
                )
            try:
                password = unseal_password(self.settings, sealed)
            except KeyProblem as exc:
                raise SourceFailed(f"The mailbox password cannot be read: {exc.reason}",
                                   paused=True) from None  # fmt: skip
            self.client = imap.open_mailbox(source.config, password)
            self._sealed = sealed
        return self.client

    def close(self) -> None:
        if self.client is not None:
            imap.close_mailbox(self.client)
            self.client = None


class SourceRunner(Loop):
    """The loop of one source, in a thread of its own."""

    # A wake ("Sync now", a new password, a change in the folder) cuts a back-off short: the
    # failures here are a remote server's or a folder's, not caused by what wakes the loop.
    wake_cuts_backoff = True

    def __init__(self, db: Database, settings: Settings, workspace_id: UUID, source_id: UUID):
        super().__init__()
        self.name = f"source-{str(source_id)[:8]}"
        self.scan_s = float(settings.source_scan_s)
        # The longest wait between rounds: each round says when the next is due (a scan's
        # interval; a paused source's hour), and `Loop` caps that at `poll_s`.
        self.poll_s = PAUSED_WAIT_S
        self.sync = SourceSync(db, settings, workspace_id, source_id)
        # Set by a wake or a stop: cuts short a wait in IDLE.
        self._interrupt = threading.Event()
        # Set by a stop only: ends a round between two items, and the watcher.
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self._watch_stop: threading.Event | None = None
        self._watched: tuple[int, int] | None = None  # the watched folder's device and inode
        self._unwatched = False  # its watcher failed: scanned every UNWATCHED_SCAN_S

    def wake(self) -> None:
        self._interrupt.set()
        super().wake()

    def stop(self) -> None:
        self._interrupt.set()
        self._stopping.set()
        super().stop()

    def round(self) -> float | None:
        self._interrupt.clear()
        try:
            source = self.sync.load()
        except NotFound:  # removed: this loop ends
            self.stop()
            return None
        if source.kind == "folder":
            self._watch(source)
        try:
            counts = self.sync.round(self._stopping)
        except SourceFailed as exc:
            if not exc.paused:
                raise  # retried with a growing pause
            # It needs a person (a password, a key): tried again when woken (a new password,
            # "Sync now"), not every minute against a server that refuses it.
            log.warning("source %s paused: %s", self.sync.source_id, exc.reason)
            return PAUSED_WAIT_S
        if counts is None:
            return 1.0  # `subspace sources sync` holds it, or it was removed: look again soon
        if source.kind == "imap" and self.sync.client is not None:
            return self._wait_for_mail(self.sync.client)
        # A folder whose changes cannot be followed (the system's watches ran out, a name
        # the watcher cannot read) is scanned often instead.
        return min(self.scan_s, UNWATCHED_SCAN_S) if self._unwatched else self.scan_s

    def _wait_for_mail(self, client: IMAPClient) -> float:
        """Wait in IDLE when the server offers it; the next round is due when it ends."""
        try:
            source = self.sync.load()
            if not imap.supports_idle(client, source):
                return self.scan_s  # polled
            imap.wait_for_mail(client, source, self._interrupt, self.scan_s)
        except (SourceFailed, NotFound) as exc:
            # The connection broke while waiting: the next round opens a new one.
            self.sync.close()
            log.info("source %s: the wait for mail ended (%s)", self.sync.source_id, exc)
            return IDLE_BROKEN_WAIT_S
        return 0.0

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, SourceFailed):
            log.warning("source %s: %s", self.sync.source_id, exc.reason)
        else:
            log.error("source %s: a round failed", self.sync.source_id, exc_info=exc)

    def _watch(self, source: SyncedSource) -> None:
        """Follow the folder's changes; without them, the scans remain. A folder replaced
        by another at its path (renamed away, a new one made) is followed anew."""
        path = source.config["path"]
        try:
            status = os.stat(path)
            identity = (status.st_dev, status.st_ino)
        except OSError:
            identity = None
        watching = self._watcher is not None and self._watcher.is_alive()
        if watching and identity == self._watched:
            return
        if self._watch_stop is not None:
            self._watch_stop.set()  # the old watcher ends within its step
        if identity is None:
            return
        self._watched, self._watch_stop = identity, threading.Event()
        self._unwatched = False
        self._watcher = threading.Thread(target=self._follow, args=(path, self._watch_stop),
                                         name=f"{self.name}-watch", daemon=True)  # fmt: skip
        self._watcher.start()

    def _follow(self, path: str, stop: threading.Event) -> None:
        import watchfiles

        try:
            for _changes in watchfiles.watch(
                path,
                stop_event=stop,
                debounce=WATCH_DEBOUNCE_MS,
                step=50,
                yield_on_timeout=False,
                raise_interrupt=False,
            ):
                self.wake()
        except Exception as exc:  # the folder went, the system's watches ran out, a name
            self._unwatched = True
            log.warning("cannot follow changes in %s (%s); it is scanned every %.0f s",
                        path, exc, min(self.scan_s, UNWATCHED_SCAN_S))  # fmt: skip

    def closed(self) -> None:
        self._stopping.set()
        if self._watch_stop is not None:
            self._watch_stop.set()
        self.sync.close()
        if self._watcher is not None:
            self._watcher.join(timeout=JOIN_S)


class SourcesLoop(Loop):
    """Starts a runner per source, wakes the one a notification names, stops removed ones."""

    name = "sources"
    poll_s = SUPERVISOR_POLL_S

    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(db.dsn, SOURCES_CHANNEL)
        self.db, self.settings = db, settings
        self.runners: dict[UUID, tuple[SourceRunner, threading.Thread]] = {}
        self._asked: set[str] = set()
        self._asked_lock = threading.Lock()

    def notified(self, payload: str) -> None:
        with self._asked_lock:
            self._asked.add(payload)
        self.wake()

    def round(self) -> float | None:
        with self._asked_lock:
            asked, self._asked = self._asked, set()
        with self.db.pool.connection() as conn:
            sources = all_source_ids(conn)
        current = {source_id for _, source_id in sources}
        for source_id in list(self.runners):
            runner, thread = self.runners[source_id]
            if source_id not in current or not thread.is_alive():
                runner.stop()
                del self.runners[source_id]
        for workspace_id, source_id in sources:
            if source_id not in self.runners:
                runner = SourceRunner(self.db, self.settings, workspace_id, source_id)
                thread = threading.Thread(target=runner.run, name=runner.name, daemon=True)
                self.runners[source_id] = (runner, thread)
                thread.start()
            elif str(source_id) in asked:
                self.runners[source_id][0].wake()
        return None

    def closed(self) -> None:
        for runner, _ in self.runners.values():
            runner.stop()
        for _, thread in self.runners.values():
            thread.join(timeout=JOIN_S)
        self.runners.clear()
