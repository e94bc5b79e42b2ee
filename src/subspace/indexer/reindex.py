"""`subspace reindex`: rebuild everything derived from the stored content."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from subspace.config import Settings
from subspace.database import Database
from subspace.db.locks import SERVER_LOCK_KEY
from subspace.db.pool import Conn
from subspace.db.vector_index import (
    build_vector_indexes,
    defer_vector_index,
    forget_unused_models,
)
from subspace.errors import Conflict
from subspace.indexer import queue
from subspace.indexer.desired import IndexTarget, all_targets
from subspace.indexer.reconcile import Outcome, reconcile
from subspace.providers.base import EmbeddingProvider

# Builds every registered model's missing HNSW index (db/vector_index.py); a no-op when none
# is missing. Bulk loaders defer a model's index (defer_vector_index), write, then run this:
# building is several times faster than inserting row by row into a live HNSW graph.
VECTOR_INDEX_SQL = "select search.build_vector_indexes()"

TARGETS_PER_TRANSACTION = 200


@dataclass
class ReindexResult:
    files_extracted: int
    files_failed: int
    items: int
    outcome: Outcome


def refuse_if_served(db: Database) -> None:
    """Raise Conflict when a Subspace server holds this database."""
    with db.pool.connection() as conn:
        row = conn.execute("select pg_try_advisory_lock(%s) as free", (SERVER_LOCK_KEY,)).fetchone()
        if row is not None and row["free"]:
            conn.execute("select pg_advisory_unlock(%s)", (SERVER_LOCK_KEY,))
            return
    raise Conflict(
        "A Subspace server is running on this database. Stop it (Ctrl-C on `subspace serve`), "
        "then run `subspace reindex` again."
    )


def reembed(
    db: Database,
    settings: Settings,
    provider: EmbeddingProvider,
    kb_id: UUID | None,
    progress: Callable[[int], None],
    total: Callable[[int], None] = lambda _: None,
) -> tuple[int, Outcome]:
    """Drop the active model's embeddings (of one knowledge base, or all) and embed again.

    The old vectors are kept aside for the run, so text that did not change costs no
    provider call. The items queued before the run leave the queue at its end, as the run
    read them afterwards; items written meanwhile are left to the indexer.
    """
    rebuild_index = kb_id is None
    with db.pool.connection() as conn:
        # Taken before the targets are read: every item queued is then visible to the run.
        queue.take_new(conn)
        waiting = queue.queued(conn)
        targets = all_targets(conn, kb_id=kb_id)
        total(len(targets))
        conn.execute(
            "create temp table reindex_previous as select workspace_id, model, text_hash, vec "
            "from search.embeddings where model = %s and (%s::uuid is null or kb_id = %s)",
            (provider.model, kb_id, kb_id),
        )
        conn.execute("create index on reindex_previous (workspace_id, model, text_hash)")
        conn.execute(
            "delete from search.embeddings where model = %s and (%s::uuid is null or kb_id = %s)",
            (provider.model, kb_id, kb_id),
        )
        if rebuild_index:
            defer_vector_index(conn, provider.model, provider.dimensions)
        conn.commit()
        outcome = Outcome()
        try:
            for start in range(0, len(targets), TARGETS_PER_TRANSACTION):
                batch = targets[start : start + TARGETS_PER_TRANSACTION]
                with conn.transaction():
                    outcome.add(
                        reconcile(
                            conn,
                            provider,
                            batch,
                            batch_size=settings.embed_batch,
                            reuse_table="reindex_previous",
                        )
                    )
                progress(len(batch))
            with conn.transaction():
                _leave_covered(conn, waiting, outcome, everything=kb_id is None)
        finally:
            conn.rollback()
            # Every model keeps one index: the active one's is built again (as is any other
            # found missing), and a model whose vectors are all gone loses its own.
            build_vector_indexes(conn)
            if rebuild_index:
                forget_unused_models(conn)
            conn.execute("drop table if exists reindex_previous")
            conn.commit()
    return len(targets), outcome


def _leave_covered(
    conn: Conn, waiting: list[queue.Queued], outcome: Outcome, *, everything: bool
) -> None:
    """Take out of the queue the items that were waiting when the reindex began and that it
    covered (unless written again since).

    A full reindex covers every item (what an item no longer has was dropped with the old
    vectors); a reindex of one knowledge base covers the items it reconciled. Items another
    indexer held (`busy`) stay queued.
    """
    done: set[IndexTarget] = set(outcome.done)
    busy: set[IndexTarget] = set(outcome.busy)
    queue.embedded(
        conn, [e for e in waiting if e.target not in busy and (everything or e.target in done)]
    )
