"""Writing search.embeddings: batched, idempotent upserts and pruning."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from uuid import UUID

from pgvector import HalfVector

from subspace.db.pool import Conn
from subspace.indexer.chunking import Chunk
from subspace.providers.base import Vectors


@dataclass(frozen=True)
class Stored:
    """What an embedding row says about its chunk."""

    text_hash: str
    kind: str
    kb_id: UUID


def stored_embeddings(
    conn: Conn, workspace_id: UUID, model: str, item_ids: Sequence[UUID]
) -> dict[str, tuple[UUID, Stored]]:
    """ref -> (item id, what is stored) for every embedding of these items under `model`."""
    rows = conn.execute(
        "select ref, item_id, text_hash, kind, kb_id from search.embeddings "
        "where workspace_id = %s and model = %s and item_id = any(%s)",
        (workspace_id, model, list(item_ids)),
    ).fetchall()
    return {r["ref"]: (r["item_id"], Stored(r["text_hash"], r["kind"], r["kb_id"])) for r in rows}


def reusable_vectors(
    conn: Conn, workspace_id: UUID, model: str, hashes: Sequence[str], table: str
) -> dict[str, HalfVector]:
    """Vectors already computed for these text hashes (in `table`), so no provider call is
    needed: the same text under the same model always has the same embedding."""
    if not hashes:
        return {}
    rows = conn.execute(
        f"select distinct on (text_hash) text_hash, vec from {table} "
        "where workspace_id = %s and model = %s and text_hash = any(%s)",
        (workspace_id, model, list(hashes)),
    ).fetchall()
    return {r["text_hash"]: r["vec"] for r in rows}


def upsert_embeddings(
    conn: Conn,
    workspace_id: UUID,
    model: str,
    chunks: Sequence[Chunk],
    vectors: Sequence[HalfVector] | Vectors,
) -> int:
    """Insert or update one embedding per chunk; return the rows written.

    Idempotent: writing the same chunk twice leaves one row. When `chunks` names a ref twice
    the last one wins, and a chunk whose source is older than the stored one never replaces
    it, so a slow writer cannot undo a newer text.
    """
    latest: dict[str, tuple[Chunk, HalfVector]] = {}
    for chunk, vector in zip(chunks, vectors, strict=True):
        latest[chunk.ref] = (
            chunk,
            vector if isinstance(vector, HalfVector) else HalfVector(vector),
        )
    if not latest:
        return 0
    conn.execute(
        "create temp table if not exists embedding_stage "
        "(like search.embeddings including defaults) on commit delete rows"
    )
    conn.execute("delete from embedding_stage")
    columns = "workspace_id, model, ref, kind, kb_id, item_id, target_id, text_hash, vec, source_at"
    with conn.cursor().copy(f"copy embedding_stage ({columns}) from stdin (format binary)") as copy:
        copy.set_types(
            [
                "uuid",
                "text",
                "text",
                "text",
                "uuid",
                "uuid",
                "uuid",
                "text",
                "halfvec",
                "timestamptz",
            ]
        )
        for chunk, vector in latest.values():
            copy.write_row(
                (
                    workspace_id,
                    model,
                    chunk.ref,
                    chunk.kind,
                    chunk.kb_id,
                    chunk.item_id,
                    chunk.target_id,
                    chunk.text_hash,
                    vector,
                    chunk.source_at,
                )
            )
    cur = conn.execute(
        f"insert into search.embeddings ({columns}, updated_at) "
        f"select {columns}, now() from embedding_stage "
        "on conflict (workspace_id, model, ref) do update set "
        "kind = excluded.kind, kb_id = excluded.kb_id, item_id = excluded.item_id, "
        "target_id = excluded.target_id, text_hash = excluded.text_hash, vec = excluded.vec, "
        "source_at = excluded.source_at, updated_at = now() "
        "where search.embeddings.source_at <= excluded.source_at"
    )
    return cur.rowcount


def update_metadata(conn: Conn, workspace_id: UUID, model: str, chunks: Iterable[Chunk]) -> int:
    """Update kind and knowledge base of embeddings whose text did not change."""
    rows = [(c.kind, c.kb_id, workspace_id, model, c.ref) for c in chunks]
    if not rows:
        return 0
    conn.cursor().executemany(
        "update search.embeddings set kind = %s, kb_id = %s, updated_at = now() "
        "where workspace_id = %s and model = %s and ref = %s",
        rows,
    )
    return len(rows)


def delete_refs(conn: Conn, workspace_id: UUID, model: str, refs: Sequence[str]) -> int:
    if not refs:
        return 0
    cur = conn.execute(
        "delete from search.embeddings where workspace_id = %s and model = %s and ref = any(%s)",
        (workspace_id, model, list(refs)),
    )
    return cur.rowcount
