"""The extraction worker: moves uploaded files from `processing` to `ready` or `failed`."""

from __future__ import annotations

import itertools
import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

from subspace.config import Settings
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.ingest.extract import Extracted, ExtractLimits
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.isolation import ParserPool
from subspace.loop import Loop
from subspace.outbox.append import CHANNEL as OUTBOX_CHANNEL
from subspace.outbox.append import append_event
from subspace.splitting import Piece, split_blocks
from subspace.text import clean_text

log = logging.getLogger(__name__)

MAX_REASON_CHARS = 2_000  # a failure reason is a sentence, not a copy of the file


def extract_limits(settings: Settings) -> ExtractLimits:
    return ExtractLimits(
        max_chars=settings.max_extracted_chars,
        max_pdf_pages=settings.max_pdf_pages,
        max_archive_inflated_bytes=settings.max_archive_inflated_bytes,
        max_archive_entries=settings.max_archive_entries,
        max_html_depth=settings.max_html_depth,
    )


class Rotation:
    """Whose turn it is to have a file extracted: the workspace served least recently, so
    one workspace's queue of slow files cannot hold up another's.

    With `per_workspace`, a workspace has at most that many files in extraction at once, so
    the other workers stay free for the other workspaces (two workers racing for the last
    free place may both take it: the cap can be passed by one for a file). Shared by the
    worker threads of one process; thread-safe.
    """

    def __init__(self, per_workspace: int | None = None) -> None:
        self._lock = threading.Lock()
        self._turns = itertools.count(1)
        self._served: dict[UUID, int] = {}
        self._busy: Counter[UUID] = Counter()
        self._per_workspace = per_workspace

    def snapshot(self) -> tuple[list[UUID], list[int], list[UUID]]:
        """(workspaces served, the turn each was last served at, workspaces at their cap)."""
        with self._lock:
            full = [
                ws
                for ws, busy in self._busy.items()
                if self._per_workspace is not None and busy >= self._per_workspace
            ]
            return list(self._served), list(self._served.values()), full

    def take(self, workspace_id: UUID) -> None:
        """The workspace got a file: it goes to the back of the line until `end`."""
        with self._lock:
            self._served[workspace_id] = next(self._turns)
            self._busy[workspace_id] += 1

    def end(self, workspace_id: UUID) -> None:
        with self._lock:
            self._busy[workspace_id] -= 1


def extract_next(
    db: Database,
    settings: Settings,
    pool: ParserPool,
    only: Collection[UUID] | None = None,
    rotation: Rotation | None = None,
) -> bool:
    """Extract one file still `processing` (among `only`, if given); False when none is left.

    The file is the oldest of the workspace whose turn it is. Its row stays locked
    while its text is extracted, so several workers share the queue without doing a file
    twice, and a worker that dies leaves the file to the next. A file is tried once: a
    timeout, a crash or an error while storing the outcome marks it failed.
    """
    rotation = Rotation() if rotation is None else rotation
    ids = None if only is None else list(only)
    claimed: tuple[UUID, UUID] | None = None
    try:
        # One statement chooses and locks the file, as a plain queue's would: listing the
        # waiting workspaces first made a claim 9 ms instead of 4 (bench/ingest.py, 2 workers).
        with db.pool.connection() as conn, conn.transaction():
            row = _claim(conn, rotation, ids)
            if row is None:
                return False
            claimed = (row["workspace_id"], row["id"])
            _extract_and_record(conn, settings, pool, row["workspace_id"], row["id"], row)
    except Exception as exc:
        if claimed is None:
            raise
        # Left `processing`, the file would be claimed again and fail again, forever.
        log.exception("extracting file %s failed", claimed[1])
        _record_failure(db, *claimed, f"extraction failed ({type(exc).__name__})")
    finally:
        if claimed is not None:
            rotation.end(claimed[0])
    return True


def _extract_and_record(
    conn: Conn,
    settings: Settings,
    pool: ParserPool,
    workspace_id: UUID,
    file_id: UUID,
    stored: dict[str, Any],
) -> bool:
    """Extract a file's text from its `stored` name, content type and bytes in a child, and
    record the outcome in `conn`'s transaction; True when the text was read."""
    try:
        # Waits for a child within the budget, however long: this is background work.
        with pool.lease(workspace_id, None) as extractor:
            result: Extracted | str = extractor.extract(
                bytes(stored["data"]),
                stored["name"],
                stored["content_type"],
                extract_limits(settings),
                timeout_s=settings.extract_timeout_s,
            )
    except ExtractionFailed as exc:
        result = exc.reason
    record_extraction(conn, workspace_id, file_id, result)
    return not isinstance(result, str)


# The oldest file of the workspace served least recently (never served first, then the one
# waiting longest), skipping files other workers hold. The waiting workspaces are read by
# jumping from one to the next through files_processing, and each one's oldest file is its
# first entry there: a claim costs the same with a hundred thousand files waiting as with ten
# (sorting every waiting file made claiming them all take a time that grew with their square).
# Workspaces are tried in turn until one has a file no other worker holds; only the file
# returned is locked. The locking query carries no blob.
_CLAIM = """
with recursive waiting (workspace_id) as (
    (select workspace_id from kb.files where status = 'processing'
     order by workspace_id limit 1)
    union all
    select (select f.workspace_id from kb.files f
            where f.status = 'processing' and f.workspace_id > w.workspace_id
            order by f.workspace_id limit 1)
    from waiting w where w.workspace_id is not null
), in_turn as (
    select w.workspace_id, coalesce(s.turn, 0) as turn,
           (select f.created_at from kb.files f
            where f.workspace_id = w.workspace_id and f.status = 'processing'
            order by f.created_at, f.id limit 1) as oldest
    from waiting w
    left join unnest(%(served)s::uuid[], %(turns)s::bigint[]) as s (workspace_id, turn)
        on s.workspace_id = w.workspace_id
    where w.workspace_id is not null and w.workspace_id <> all(%(full)s::uuid[])
), next_file as materialized (
    select f.workspace_id, f.id
    from (select workspace_id from in_turn order by turn, oldest, workspace_id) t
    cross join lateral (
        select f.workspace_id, f.id from kb.files f
        where f.workspace_id = t.workspace_id and f.status = 'processing'
          and (%(only)s::uuid[] is null or f.id = any(%(only)s))
        order by f.created_at, f.id
        limit 1
        for update of f skip locked
    ) f
    limit 1
)
select f.workspace_id, f.id, f.name, f.content_type, b.data
from next_file n
join kb.files f on f.workspace_id = n.workspace_id and f.id = n.id
join kb.blobs b on b.workspace_id = f.workspace_id and b.sha256 = f.blob_sha256
"""


def _claim(conn: Conn, rotation: Rotation, ids: list[UUID] | None) -> dict[str, Any] | None:
    """Lock the next file to extract, in the rotation's order, and take the turn."""
    served, turns, full = rotation.snapshot()
    row = conn.execute(
        _CLAIM, {"served": served, "turns": turns, "only": ids, "full": full}
    ).fetchone()
    if row is not None:
        rotation.take(row["workspace_id"])
    return row


def _record_failure(db: Database, workspace_id: UUID, file_id: UUID, reason: str) -> None:
    with db.pool.connection() as conn, conn.transaction():
        still = conn.execute(
            "select 1 from kb.files where workspace_id = %s and id = %s "
            "and status = 'processing' for update skip locked",
            (workspace_id, file_id),
        ).fetchone()
        if still is not None:
            record_extraction(conn, workspace_id, file_id, reason)


def record_extraction(
    conn: Conn, workspace_id: UUID, file_id: UUID, result: Extracted | str
) -> None:
    """Store extracted text and mark the file ready, or mark it failed with the reason."""
    if isinstance(result, str):
        # A reason can quote a hostile file's bytes; Postgres refuses NUL and lone surrogates.
        result = clean_text(result)[:MAX_REASON_CHARS]
        conn.execute(
            "delete from search.file_text where workspace_id = %s and file_id = %s",
            (workspace_id, file_id),
        )
        store_file_chunks(conn, workspace_id, file_id, [])
        conn.execute(
            "update kb.files set status = 'failed', status_reason = %s, updated_at = now() "
            "where workspace_id = %s and id = %s",
            (result, workspace_id, file_id),
        )
        log.info("file %s failed: %s", file_id, result)
    else:
        conn.execute(
            "insert into search.file_text (workspace_id, file_id, text, truncated) "
            "values (%s, %s, %s, %s) on conflict (workspace_id, file_id) do update "
            "set text = excluded.text, truncated = excluded.truncated, extracted_at = now()",
            (workspace_id, file_id, result.text, result.truncated),
        )
        store_file_chunks(conn, workspace_id, file_id, split_blocks(result.blocks))
        conn.execute(
            "update kb.files set status = 'ready', status_reason = null, title = %s, "
            "updated_at = now() where workspace_id = %s and id = %s",
            (result.title, workspace_id, file_id),
        )
    append_event(
        conn, workspace_id, "file.extracted", file_id=file_id, ok=not isinstance(result, str)
    )


CHUNKS_PER_STATEMENT = 200
HEADING_SEPARATOR = "\x1f"  # the unit separator: clean text never holds it


def parsers(db: Database, settings: Settings) -> ParserPool:
    """The database's children for extraction and mail, within these settings' budget."""
    return db.parsers.get(settings.extract_memory_mb, settings.parse_memory_mb)


def store_file_chunks(conn: Conn, workspace_id: UUID, file_id: UUID, pieces: list[Piece]) -> None:
    """Store the file's pieces as numbered chunks with their headings and pages, keeping each
    chunk's enabled flag.

    The chunks' generated tsvector makes the text searchable as soon as this commits.
    """
    conn.execute(
        "delete from search.file_chunks where workspace_id = %s and file_id = %s and n >= %s",
        (workspace_id, file_id, len(pieces)),
    )
    # A few hundred chunks a statement: the statistics and postings triggers run once per
    # statement, over all its rows, instead of once per chunk (12 ms each for a file of
    # random bytes, whose every chunk is words no other chunk holds).
    for start in range(0, len(pieces), CHUNKS_PER_STATEMENT):
        batch = pieces[start : start + CHUNKS_PER_STATEMENT]
        # Headings travel as one text each (joined by a character no heading holds), since
        # unnest cannot take an array of arrays of different lengths.
        conn.execute(
            "insert into search.file_chunks (workspace_id, file_id, n, text, headings, page) "
            "select %s, %s, n, text, "
            "coalesce(string_to_array(nullif(headings, ''), %s), '{}'), page "
            "from unnest(%s::int[], %s::text[], %s::text[], %s::int[]) "
            "as c (n, text, headings, page) "
            "on conflict (workspace_id, file_id, n) do update set text = excluded.text, "
            "headings = excluded.headings, page = excluded.page",
            (
                workspace_id,
                file_id,
                HEADING_SEPARATOR,
                list(range(start, start + len(batch))),
                [piece.text for piece in batch],
                [HEADING_SEPARATOR.join(piece.headings) for piece in batch],
                [piece.page for piece in batch],
            ),
        )


def extract_pending(
    db: Database,
    settings: Settings,
    only: Collection[UUID] | None = None,
    *,
    workers: int = 1,
) -> int:
    """Extract files until none is `processing` (among `only`, if given); return how many.

    `workers` threads, each with its own child process, share the queue, taking the
    workspaces in turn.
    """
    rotation = Rotation()

    def drain() -> int:
        done = 0
        while extract_next(db, settings, parsers(db, settings), only, rotation):
            done += 1
        return done

    if workers <= 1:
        return drain()
    with ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(lambda _: drain(), range(workers)))


class ExtractionLoop(Loop):
    """One extraction thread: each round extracts files until none waits."""

    name = "extraction"

    def __init__(self, db: Database, settings: Settings, rotation: Rotation) -> None:
        # Woken by every outbox event (an upload is one), from whichever process wrote it; a
        # missed one, by the poll.
        super().__init__(db.dsn, OUTBOX_CHANNEL)
        self._db, self._settings, self._rotation = db, settings, rotation
        self._parsers: ParserPool | None = None

    def round(self) -> None:
        if self._parsers is None:
            self._parsers = parsers(self._db, self._settings)
        while not self.stopping and extract_next(
            self._db, self._settings, self._parsers, rotation=self._rotation
        ):
            pass


class ExtractionWorker:
    """Background threads (SUBSPACE_EXTRACT_WORKERS) that extract files as they arrive,
    taking the workspaces in turn. `wake()` after an upload."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self._settings = settings
        workers = max(1, settings.extract_workers)
        # One worker is kept for the other workspaces while one has slow files in hand.
        rotation = Rotation(per_workspace=max(1, workers - 1))
        self.loops = [ExtractionLoop(db, settings, rotation) for _ in range(workers)]
        self._threads = [
            threading.Thread(target=loop.run, name=f"extraction-{n}", daemon=True)
            for n, loop in enumerate(self.loops)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        for loop in self.loops:
            loop.wake()

    def stop(self) -> None:
        """Stop after the files in hand. Safe to call twice."""
        for loop in self.loops:
            loop.stop()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=self._settings.extract_timeout_s + 5)


def reextract_files(
    db: Database, settings: Settings, kb_id: UUID | None, progress: Callable[[int], None]
) -> tuple[int, int]:
    """Extract every live file's text again from its stored blob; return (ready, failed)."""
    with db.pool.connection() as conn:
        files = conn.execute(
            "select workspace_id, id from kb.files where deleted_at is null "
            "and (%s::uuid is null or kb_id = %s) order by workspace_id, id",
            (kb_id, kb_id),
        ).fetchall()
    pool = parsers(db, settings)
    ready = failed = 0
    for row in files:
        with db.pool.connection() as conn, conn.transaction():
            blob = conn.execute(
                "select f.name, f.content_type, b.data from kb.files f join kb.blobs b "
                "on b.workspace_id = f.workspace_id and b.sha256 = f.blob_sha256 "
                "where f.workspace_id = %s and f.id = %s for update of f",
                (row["workspace_id"], row["id"]),
            ).fetchone()
            if blob is None:
                continue
            if _extract_and_record(conn, settings, pool, row["workspace_id"], row["id"], blob):
                ready += 1
            else:
                failed += 1
        progress(1)
    return ready, failed
