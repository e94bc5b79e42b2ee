"""What a search row holds beyond what a search shows: its whole text, its place in its
item, and its similarity to the query. For a surface that answers in another system's shape
(the Sim-compatible endpoint, api/routes/knowledge_search.py), which reshapes these.

- The whole text of a row stored apart from its item (a bullet, a file chunk) is read from
  its kind's table; a row that is its item (a page title, a mail) keeps its passage.
- The place: a chunk's number, a bullet's place in its page's reading order (depth first, 1
  for the first bullet), 0 for a row that is its item.
- The similarity: 1 - cosine distance between the query's embedding and the row's stored
  one, or its text embedded now when it has none yet; 1 for a match by tags alone; 0 when no
  vector can be had (no provider, or it did not answer).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from uuid import UUID

from pgvector import HalfVector

from subspace.context import Context
from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.hydrate import Row
from subspace.search.refs import Ref, parse_ref
from subspace.search.request import SearchResponse
from subspace.search.searcher import Searcher
from subspace.search.vector import (
    EmbeddingUnavailable,
    cosine_similarity,
    embed_query,
    start_embedding,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowDetail:
    content: str
    place: int
    similarity: float


def row_details(cx: Context, searcher: Searcher, found: SearchResponse) -> dict[str, RowDetail]:
    """Each row's whole text, place and similarity to the query, by its ref."""
    refs = {row.ref: _parsed(row) for row in found.rows}
    kinds = {text: ref.kind for text, ref in refs.items() if ref.kind is not None}
    vector = _query_vector(cx, searcher, found)
    model = searcher.provider.model if searcher.provider is not None else ""
    with cx.transaction() as conn:
        stored = _stored_similarities(conn, cx.actor.workspace_id, found.rows, vector, model)
        texts = _whole_texts(conn, cx.actor.workspace_id, found.rows, refs)
        places = _reading_places(conn, cx.actor.workspace_id, found.rows, kinds)
    content = {row.ref: texts.get(row.ref) or row.passage for row in found.rows}
    tags_only = not found.query.strip()
    unembedded = [content[ref] for ref in content if ref not in stored]
    now = {} if tags_only else _similarities_now(cx, searcher, vector, unembedded)
    details = {}
    for row in found.rows:
        similarity = 1.0 if tags_only else stored.get(row.ref, now.get(content[row.ref], 0.0))
        ref = refs[row.ref]
        place = places.get(row.id, 0) if kinds[row.ref].target_kind == "node" else ref.chunk or 0
        details[row.ref] = RowDetail(content[row.ref], place, similarity)
    return details


def _parsed(row: Row) -> Ref:
    """A search row's ref, parsed once: its kind, id and chunk number."""
    ref = parse_ref(row.ref)
    assert ref is not None and ref.kind is not None, f"a search row's ref {row.ref!r}"
    return ref


def _query_vector(cx: Context, searcher: Searcher, found: SearchResponse) -> HalfVector | None:
    """The query's embedding, as the vector leg used it (from the query cache); None when the
    search had no query or the vector leg could not embed it (asking again would only wait)."""
    provider = searcher.provider
    if provider is None or not found.query.strip():
        return None
    leg = found.legs.get("vector")
    if leg is not None and leg.error:
        return None
    try:
        return embed_query(
            searcher.runtime, provider, found.query, timeout_s=cx.settings.embed_timeout_ms / 1000
        )
    except EmbeddingUnavailable as exc:
        log.warning("query embedding for similarities failed: %s", exc)
        return None


def _stored_similarities(
    conn: Conn, workspace: UUID, rows: list[Row], vector: HalfVector | None, model: str
) -> dict[str, float]:
    """ref -> 1 - cosine distance to the query of `model`'s stored vector, for the rows that
    have one."""
    if not rows or vector is None:
        return {}
    found = conn.execute(
        "select e.ref, 1 - (e.vec <=> %s::halfvec) as similarity from search.embeddings e "
        "where e.workspace_id = %s and e.model = %s and e.ref = any(%s)",
        (vector, workspace, model, [row.ref for row in rows]),
    ).fetchall()
    return {r["ref"]: float(r["similarity"]) for r in found}


def _whole_texts(
    conn: Conn, workspace: UUID, rows: list[Row], refs: dict[str, Ref]
) -> dict[str, str]:
    """ref -> the whole text of each row stored apart from its item, read from its kind's
    table by its ref."""
    wanted_by_kind: dict[registry.KindSpec, list[str]] = defaultdict(list)
    for row in rows:
        spec = refs[row.ref].kind
        if spec is not None and not spec.in_item_table:
            wanted_by_kind[spec].append(row.ref)
    found: dict[str, str] = {}
    for spec, wanted in wanted_by_kind.items():
        a, keys = spec.alias, [refs[text].id for text in wanted]
        read = conn.execute(
            f"select {spec.ref_sql(a)} as ref, {a}.{spec.text} as text from {spec.table} {a} "
            f"where {a}.workspace_id = %s and {a}.{spec.key} = any(%s) "
            f"and ({spec.ref_sql(a)}) = any(%s)",
            (workspace, keys, wanted),
        ).fetchall()
        found.update((r["ref"], r["text"]) for r in read)
    return found


def _reading_places(
    conn: Conn, workspace: UUID, rows: list[Row], kinds: dict[str, registry.KindSpec]
) -> dict[UUID, int]:
    """node id -> its place in its page's reading order (depth first, 1 for the first bullet),
    for the pages of the bullets among `rows`."""
    pages = list(
        {row.page_id for row in rows if kinds[row.ref].target_kind == "node" and row.page_id}
    )
    if not pages:
        return {}
    found = conn.execute(
        "select page_id, id, parent_id from kb.nodes where workspace_id = %s "
        "and page_id = any(%s) order by page_id, parent_id nulls first, position, id",
        (workspace, pages),
    ).fetchall()
    children: dict[tuple[UUID, UUID | None], list[UUID]] = {}
    for r in found:
        children.setdefault((r["page_id"], r["parent_id"]), []).append(r["id"])
    places: dict[UUID, int] = {}
    for page in pages:
        place = 0
        stack = list(reversed(children.get((page, None), [])))
        while stack:
            node = stack.pop()
            place += 1
            places[node] = place
            stack.extend(reversed(children.get((page, node), [])))
    return places


def _similarities_now(
    cx: Context, searcher: Searcher, vector: HalfVector | None, texts: list[str]
) -> dict[str, float]:
    """text -> its similarity to the query, embedded now (rows written since the indexer
    last ran), in one provider call; nothing when a vector cannot be had."""
    provider = searcher.provider
    wanted = list(dict.fromkeys(t for t in texts if t.strip()))
    if provider is None or vector is None or not wanted:
        return {}
    timeout_s = cx.settings.embed_timeout_ms / 1000
    try:
        vectors = start_embedding(searcher.runtime, provider, wanted, timeout_s=timeout_s).result()
    except EmbeddingUnavailable:
        return {}
    return {text: cosine_similarity(vector, v) for text, v in zip(wanted, vectors, strict=True)}
