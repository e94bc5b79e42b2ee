"""The extraction worker: moves uploaded files from `processing` to `ready` or `failed`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from uuid import UUID

from subspace.commands.outbox import append_event
from subspace.config import Settings
from subspace.db.pool import Conn
from subspace.indexer.chunking import split_text
from subspace.ingest.extract import Extracted, ExtractionFailed, ExtractLimits
from subspace.ingest.isolation import IsolatedExtractor
from subspace.runtime import Database

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0  # also wakes at once for uploads made by this process


def extract_limits(settings: Settings) -> ExtractLimits:
    return ExtractLimits(
        max_chars=settings.max_extracted_chars,
        max_pdf_pages=settings.max_pdf_pages,
        max_archive_inflated_bytes=settings.max_archive_inflated_bytes,
        max_archive_entries=settings.max_archive_entries,
        max_html_depth=settings.max_html_depth,
    )


def extract_next(
    db: Database,
    settings: Settings,
    extractor: IsolatedExtractor,
    only: Collection[UUID] | None = None,
) -> bool:
    """Extract one file still `processing` (among `only`, if given); False when none is left.

    The file's row stays locked while its text is extracted, so several workers share the
    queue without doing a file twice, and a worker that dies leaves the file to the next.
    """
    with db.pool.connection() as conn, conn.transaction():
        sql = (
            "select f.workspace_id, f.id, f.name, f.content_type, b.data from kb.files f "
            "join kb.blobs b on b.workspace_id = f.workspace_id and b.sha256 = f.blob_sha256 "
            "where f.status = 'processing'"
        )
        params: list[object] = []
        if only is not None:
            sql += " and f.id = any(%s)"
            params.append(list(only))
        sql += " order by f.created_at, f.id limit 1 for update of f skip locked"
        row = conn.execute(sql, params).fetchone()
        if row is None:
            return False
        try:
            result: Extracted | str = extractor.extract(
                bytes(row["data"]),
                row["name"],
                row["content_type"],
                extract_limits(settings),
                timeout_s=settings.extract_timeout_s,
            )
        except ExtractionFailed as exc:
            result = exc.reason
        record_extraction(conn, row["workspace_id"], row["id"], result)
    return True


def record_extraction(
    conn: Conn, workspace_id: UUID, file_id: UUID, result: Extracted | str
) -> None:
    """Store extracted text and mark the file ready, or mark it failed with the reason."""
    if isinstance(result, str):
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
        store_file_chunks(conn, workspace_id, file_id, split_text(result.text))
        conn.execute(
            "update kb.files set status = 'ready', status_reason = null, updated_at = now() "
            "where workspace_id = %s and id = %s",
            (workspace_id, file_id),
        )
    append_event(
        conn, workspace_id, "file.extracted", file_id=file_id, ok=not isinstance(result, str)
    )


def new_extractor(settings: Settings) -> IsolatedExtractor:
    return IsolatedExtractor(settings.extract_memory_mb * 1024 * 1024)


def store_file_chunks(conn: Conn, workspace_id: UUID, file_id: UUID, pieces: list[str]) -> None:
    """Store the file's text pieces as numbered chunks, keeping each chunk's enabled flag.

    The chunks' generated tsvector makes the text searchable as soon as this commits.
    """
    conn.execute(
        "delete from search.file_chunks where workspace_id = %s and file_id = %s and n >= %s",
        (workspace_id, file_id, len(pieces)),
    )
    if pieces:
        conn.cursor().executemany(
            "insert into search.file_chunks (workspace_id, file_id, n, text) "
            "values (%s, %s, %s, %s) on conflict (workspace_id, file_id, n) "
            "do update set text = excluded.text",
            [(workspace_id, file_id, n, text) for n, text in enumerate(pieces)],
        )


def extract_pending(
    db: Database,
    settings: Settings,
    only: Collection[UUID] | None = None,
    *,
    workers: int = 1,
) -> int:
    """Extract files until none is `processing` (among `only`, if given); return how many.

    `workers` threads, each with its own child process, share the queue.
    """

    def drain() -> int:
        extractor = new_extractor(settings)
        done = 0
        try:
            while extract_next(db, settings, extractor, only):
                done += 1
        finally:
            extractor.close()
        return done

    if workers <= 1:
        return drain()
    with ThreadPoolExecutor(workers) as pool:
        return sum(pool.map(lambda _: drain(), range(workers)))


class ExtractionWorker:
    """A background thread that extracts files as they arrive. `wake()` after an upload."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self._db = db
        self._settings = settings
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="extraction", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Stop after the file in hand. Safe to call twice."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self._settings.extract_timeout_s + 5)

    def _run(self) -> None:
        extractor = new_extractor(self._settings)
        try:
            while not self._stop.is_set():
                try:
                    while not self._stop.is_set() and extract_next(
                        self._db, self._settings, extractor
                    ):
                        pass
                except Exception:  # keep the worker alive through a database hiccup
                    log.exception("extraction worker failed; retrying")
                self._wake.wait(POLL_SECONDS)
                self._wake.clear()
        finally:
            extractor.close()
