"""The lexical follower: keeps the lexical index (search/lexical/index/layout.py) current from the
outbox, and builds it anew when it is missing, unreadable, of another format, set of kinds or
database.

One process per index folder follows (an flock on the folder, released when the process
dies); the others only read. A round reads, in one repeatable-read transaction, the events
its position's snapshot did not see, rewrites the documents of the items they name, commits
the indexes, and only then records that transaction's snapshot as the new position. A round
cut short (kill -9 mid-commit) leaves the old position, from which the next round applies
the same events again: rewriting an item's documents twice changes nothing.
"""

from __future__ import annotations

import errno
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from uuid import UUID

from subspace.config import Settings
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.errors import ConfigError
from subspace.loop import Loop
from subspace.outbox.append import CHANNEL
from subspace.outbox.reading import current_position, items_after
from subspace.search import registry
from subspace.search.lexical.index.documents import all_documents, item_documents
from subspace.search.lexical.index.integrity import (
    MISSING,
    Checksums,
    check_generation,
    clear_damage,
    engine_failed,
    report_damage,
)
from subspace.search.lexical.index.layout import (
    CURRENT,
    DISK_FULL,
    FORMAT,
    ITEM,
    STATE,
    TARGET,
    State,
    current_generation,
    database_folder,
    database_identity,
    generation_name,
    index_root,
    write_atomically,
)
from subspace.search.lexical.index.writer import FollowerLock, Writers

log = logging.getLogger(__name__)

ITEMS_PER_READ = 500  # items whose documents one statement reads
# Workspaces whose files a round checks while the writers are open, in turn: each check is a
# stat per file (some 32 files a workspace), and checking all 1,000 workspaces of a large
# server took 0.55 s a round. Every file is still checked within workspaces / CHECK_SLICE
# rounds, every one when the writers open, and all of them when a search reports damage.
CHECK_SLICE = 64
LOW_SPACE_BYTES = 16_000_000  # free in the index folder below which a failed write means full


@dataclass
class Followed:
    """What one round of the follower did."""

    items: int = 0  # items whose documents were rewritten
    documents: int = 0  # documents written
    rebuilt: bool = False
    position: str | None = None  # the snapshot the index holds after the round


class LexicalFollower(Loop):
    """Follows the outbox into the lexical index. `run_once` does one round; `run` loops
    until `stop()`, waiting longer after each failed round."""

    name = "lexical-follower"
    retry_s = 5.0  # a full disk or a removed folder is not mended in two seconds

    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(db.dsn, CHANNEL)
        self.db = db
        self.settings = settings
        self.root = index_root(settings)
        self._database: str | None = None
        self._folder: Path | None = None
        self._lock: FollowerLock | None = None
        self._writers: Writers | None = None
        self._position: str | None = None
        self._lsn: str | None = None  # the WAL position the position was taken at
        self._checksums = Checksums()
        self._checked = 0  # where the next round's slice of workspaces to check starts
        self.on_committed: Callable[[Followed], None] | None = None  # a seam for tests

    @property
    def position(self) -> str | None:
        """The snapshot the index holds every write of, while this process follows it."""
        return self._position

    @property
    def writers(self) -> Writers | None:
        """The open writers, while this process follows the index."""
        return self._writers

    @property
    def folder(self) -> Path:
        if self._folder is None:
            with self.db.pool.connection() as conn:
                self._database = database_identity(conn)
            self._folder = database_folder(self.root, self._database)
        return self._folder

    def open(self) -> Followed | None:
        """Take the folder's lock and open its writers, building the index first when it
        cannot be followed; None when another process follows it."""
        folder = self.folder
        if self._lock is None:
            self._lock = FollowerLock(folder)
        if not self._lock.acquire():
            return None
        if self._usable():
            return Followed()
        self.rebuild()
        return Followed(rebuilt=True)

    def run_once(self) -> Followed:
        """Apply what was written since the position (opening the index first). A round in a
        process that does not hold the folder's lock does nothing."""
        opened = self.open()
        if opened is None:
            return Followed()
        done = self._apply()
        done.rebuilt = opened.rebuilt
        return done

    def _usable(self) -> bool:
        """Whether the writers are open on the generation CURRENT names, whose files check
        out, which fits this database and holds a position from its past. CURRENT and the
        state file are the follower's own record, written again when damaged; a damaged
        file of the engine's makes the generation unusable (and no reader serves it)."""
        assert self._database is not None
        folder = self.folder
        if self._writers is not None and self._writers.generation.is_dir():
            self._restore_record(self._writers.generation)
        generation, problem = check_generation(
            folder, self._checksums, lambda state: state.fits(self._database or ""),
            choose=None if self._writers is None else self._next_slice,
        )  # fmt: skip
        if problem:
            level = logging.INFO if problem == MISSING else logging.WARNING
            log.log(level, "the lexical index in %s cannot serve: %s", folder, problem)
            self._close_writers()
            if generation is not None:  # readers rank in Postgres, saying why, until rebuilt
                report_damage(folder, generation, problem)
                (folder / CURRENT).unlink(missing_ok=True)
            return False
        assert generation is not None
        if self._writers is not None and generation == self._writers.generation:
            return True
        self._close_writers()
        state = State.read(generation / STATE)
        if state is None or not self._from_here(state):
            return False
        self._writers = Writers(generation, state.workspaces)
        self._position, self._lsn = state.position, state.lsn
        return True

    def _next_slice(self, state: State) -> list[str]:
        """The next CHECK_SLICE workspaces of the generation to check, in turn."""
        names = sorted(state.workspaces)
        if len(names) <= CHECK_SLICE:
            return names
        start = self._checked % len(names)
        self._checked = start + CHECK_SLICE
        return (names + names)[start : start + CHECK_SLICE]

    def _restore_record(self, generation: Path) -> None:
        """Write CURRENT and the state file again when they no longer say what the open
        writers hold (their bytes were damaged, or removed)."""
        assert self._database is not None and self._writers is not None
        if current_generation(self.folder) != generation:
            log.warning("the lexical index's CURRENT was damaged; naming %s again", generation)
            write_atomically(self.folder / CURRENT, generation.name)
        state = State(FORMAT, self._database, self._writers.kinds, self._position,
                      self._writers.workspaces, self._lsn)  # fmt: skip
        if self._position is not None and State.read(generation / STATE) != state:
            log.warning("the lexical index's state was damaged; writing it again")
            state.write(generation / STATE)

    def _from_here(self, state: State) -> bool:
        """Whether the state's position is a snapshot of this database's past (a restored
        database's transaction ids start over)."""
        with self.db.pool.connection() as conn:
            row = conn.execute(
                "select pg_snapshot_xmax(%s::pg_snapshot) <= "
                "pg_snapshot_xmax(pg_current_snapshot()) as ok",
                (state.position,),
            ).fetchone()
        return row is not None and bool(row["ok"])

    def _apply(self) -> Followed:
        """One round: the documents of the items (or of the rows of them an event names)
        written since the position, rewritten."""
        writers = self._writers
        assert writers is not None and self._position is not None and self._database is not None
        done = Followed()
        with self.db.pool.connection() as conn, conn.transaction():
            conn.execute("set transaction isolation level repeatable read")
            snapshot, lsn = current_position(conn)
            changes = _changes_after(conn, self._position)
            if not changes.items and not changes.rows:
                return done
            for kind, pairs in changes.items.items():
                sources = {spec.source for spec in registry.of_item(kind)}
                done.documents += self._rewrite(conn, writers, sources, ITEM, pairs, False)
            for kind, pairs in changes.rows.items():
                sources = {s.source for s in registry.of_item(kind) if not s.in_item_table}
                done.documents += self._rewrite(conn, writers, sources, TARGET, pairs, True)
            done.items = sum(map(len, changes.items.values())) + sum(
                map(len, changes.rows.values())
            )
            writers.commit(snapshot, self._database, lsn)
        self._position = done.position = snapshot
        self._lsn = lsn
        if self.on_committed is not None:
            self.on_committed(done)
        return done

    @staticmethod
    def _rewrite(
        conn: Conn, writers: Writers, sources: set[str], field: str,
        pairs: list[tuple[UUID, UUID]], targets: bool,
    ) -> int:  # fmt: skip
        """Delete the documents the (workspace, id) pairs name by `field` in `sources`, and
        add them again as the tables hold them now; returns the documents added."""
        added = 0
        for start in range(0, len(pairs), ITEMS_PER_READ):
            chunk = pairs[start : start + ITEMS_PER_READ]
            for source in sources:
                for workspace, ident in chunk:
                    writers.delete(workspace, source, field, ident.hex)
                for document in item_documents(conn, source, chunk, targets=targets):
                    writers.add(document)
                    added += 1
        return added

    def rebuild(self, progress: Callable[[str, int], None] | None = None) -> int:
        """Build a new generation from every document, make it current, and remove the old
        ones; returns the documents written. Safe while searches run: they read the old
        generation (or rank in Postgres) until CURRENT names the new one."""
        folder = self.folder
        assert self._database is not None
        if self._lock is None:
            self._lock = FollowerLock(folder)
        if not self._lock.acquire():
            raise ConfigError(
                f"Another process follows the lexical index in {folder}. Stop it (a running "
                "`subspace serve` or `subspace indexer`) and try again."
            )
        self._close_writers()
        generation = folder / generation_name()
        generation.mkdir(parents=True)
        writers = Writers(generation)
        written = 0
        try:
            with self.db.pool.connection() as conn, conn.transaction():
                conn.execute("set transaction isolation level repeatable read")
                snapshot, lsn = current_position(conn)
                for source in writers.kinds:
                    workspace = None
                    for document in all_documents(conn, source):  # one workspace after another
                        if document.workspace != workspace:
                            writers.commit(None, self._database)  # the last one's, closed
                            workspace = document.workspace
                        writers.add(document)
                        written += 1
                        if progress is not None and written % 1000 == 0:
                            progress(source, written)
                writers.commit(snapshot, self._database, lsn)
            write_atomically(folder / CURRENT, generation.name)
        except BaseException:
            writers.close()
            shutil.rmtree(generation, ignore_errors=True)
            raise
        clear_damage(folder)
        for old in folder.glob("g*"):
            if old != generation and old.is_dir():
                shutil.rmtree(old, ignore_errors=True)
        self._writers = writers
        self._position, self._lsn = snapshot, lsn
        self._checksums = Checksums()
        log.info("built the lexical index: %d documents in %s", written, generation)
        return written

    def _close_writers(self) -> None:
        if self._writers is not None:
            try:
                self._writers.close()
            except (ValueError, OSError) as exc:
                log.warning("closing the lexical index's writers: %s", exc)
            self._writers = None
            self._position = None

    def close(self) -> None:
        """Close the writers and give the lock back (another process may follow). Safe to
        call twice."""
        self._close_writers()
        if self._lock is not None:
            self._lock.release()

    def closed(self) -> None:
        self.close()

    def round(self) -> None:
        """One round of `run`: a full disk, said to every reader, is cleared by a round that
        succeeds."""
        self.run_once()
        self._disk_full(False)

    def is_failure(self, exc: BaseException) -> bool:
        # An engine's panic is a failed round like any other; an interrupt is not.
        return isinstance(exc, Exception) or engine_failed(exc)

    def failed(self, exc: BaseException) -> None:
        """Log the failed round, close the writers (the next round opens them again), and
        tell readers in every process when the disk is full."""
        full = _out_of_space(exc, self.folder)
        self._disk_full(full)
        if full:
            log.warning("the lexical index's disk is full; retrying: %s", exc)
        else:
            log.error("lexical follower round failed; retrying", exc_info=exc)
        self._close_writers()

    def _disk_full(self, full: bool) -> None:
        """Say (by an empty file, which a full disk still takes) that writes fail for lack of
        space, for readers in every process; remove it once a round succeeds."""
        marker = self.folder / DISK_FULL
        try:
            if full:
                marker.touch()
            else:
                marker.unlink(missing_ok=True)
        except OSError:
            pass


def _out_of_space(exc: BaseException, folder: Path) -> bool:
    """Whether a failed round ran out of space: an ENOSPC, or (as the engine's writer threads
    report it only as "killed") a failure with next to no space left in the folder."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    try:
        return shutil.disk_usage(folder).free < LOW_SPACE_BYTES
    except OSError:
        return False


@dataclass
class Changes:
    """What the events since a position changed: whole items, and rows of items the events
    named (an item changed whole is not also listed by rows), each as (workspace, id) pairs
    per item kind."""

    items: dict[str, list[tuple[UUID, UUID]]] = field(default_factory=dict)
    rows: dict[str, list[tuple[UUID, UUID]]] = field(default_factory=dict)


def _changes_after(conn: Conn, position: str) -> Changes:
    """What the events the position's snapshot did not see changed."""
    found = Changes()
    for item in items_after(conn, position):
        if item.rows is None:
            found.items.setdefault(item.kind, []).append((item.workspace_id, item.item_id))
        else:
            listed = found.rows.setdefault(item.kind, [])
            listed.extend((item.workspace_id, row) for row in sorted(item.rows))
    return found
