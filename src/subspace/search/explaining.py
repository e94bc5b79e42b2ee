"""Explaining results: how a row got its score and place, each leg's own list, and why a
target is or is not among the results."""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.providers.base import EmbeddingProvider
from subspace.search.filters import Scope, tag_predicates
from subspace.search.fusion import RRF_K, Fused, Leg, dedupe
from subspace.search.hydrate import Row, hydrate
from subspace.search.lexical import TsQueries


def row_explain(item: Fused) -> dict[str, Any]:
    """How a row got its score and its place."""
    return {
        "score": item.score,
        "formula": f"sum of weight / ({RRF_K} + rank) over the legs that found it",
        "terms": [
            {"leg": t.leg, "rank": t.rank, "weight": t.weight, "value": t.value} for t in item.terms
        ],
        "tie": None
        if item.tie_group == 1
        else {"group_size": item.tie_group, "decided_by": item.tie_reason},
    }


def leg_lists(
    conn: Conn, scope: Scope, legs: list[Leg], fused: list[Fused], limit: int, tsq: TsQueries
) -> dict[str, list[Row]]:
    """Each leg's own first `limit` targets as rows, in that leg's order, each with its
    fusion terms: what the fused list is made of, shown beside it.

    `fused` holds every candidate (before grouping by page), so each hit has its fused row.
    """
    by_target = {item.target: item for item in fused}
    lists: dict[str, list[Row]] = {}
    for leg in legs:
        if not leg.ran:
            continue
        items = [by_target[hit.target] for hit in dedupe(leg.hits)[:limit]]
        rows = hydrate(conn, scope, items, tsq)
        explained = {item.target: row_explain(item) for item in items}
        for row in rows:
            row.explain = explained.get(({"mem": "node"}.get(row.type, row.type), row.id))
        lists[leg.name] = rows
    return lists


# -- why is a target absent ------------------------------------------------------------------


def _parse_target(conn: Conn, ws: UUID, spec: str) -> tuple[str, UUID, int | None] | None:
    parts = spec.strip().split(":")
    try:
        if len(parts) == 1:
            ident = UUID(parts[0])
            for kind, table in (("node", "kb.nodes"), ("page", "kb.pages"),
                                ("file", "kb.files"), ("mail", "kb.mail")):  # fmt: skip
                row = conn.execute(
                    f"select 1 from {table} where workspace_id = %s and id = %s", (ws, ident)
                ).fetchone()
                if row is not None:
                    return kind, ident, None
            return None
        kind = {"mem": "node", "memory": "node"}.get(parts[0], parts[0])
        chunk = int(parts[2]) if len(parts) > 2 and kind == "file" else None
        return kind, UUID(parts[1]), chunk
    except (ValueError, IndexError):
        return None


def _item(conn: Conn, ws: UUID, kind: str, ident: UUID) -> tuple[str, UUID, UUID] | None:
    """(item kind, item id, kb id) holding the target: the page of a node, else itself."""
    if kind == "node":
        row = conn.execute(
            "select n.page_id as item, p.kb_id from kb.nodes n join kb.pages p "
            "on p.workspace_id = n.workspace_id and p.id = n.page_id "
            "where n.workspace_id = %s and n.id = %s",
            (ws, ident),
        ).fetchone()
        return None if row is None else ("page", row["item"], row["kb_id"])
    table = {"page": "kb.pages", "file": "kb.files", "mail": "kb.mail"}.get(kind)
    if table is None:
        return None
    row = conn.execute(
        f"select kb_id from {table} where workspace_id = %s and id = %s", (ws, ident)
    ).fetchone()
    return None if row is None else (kind, ident, row["kb_id"])


def _visibility_reasons(
    conn: Conn, scope: Scope, kind: str, ident: UUID, chunk: int | None
) -> list[str]:
    params = scope.params() | {"id": ident}
    if kind == "page":
        row = conn.execute(
            "select archived_at is not null as archived, deleted_at is not null as deleted, "
            "exists (select 1 from kb.exclusions x where x.workspace_id = p.workspace_id and "
            "x.user_id = %(user)s and x.target_kind = 'page' and x.target_id = p.id) as excluded "
            "from kb.pages p where p.workspace_id = %(ws)s and p.id = %(id)s",
            params,
        ).fetchone()
    elif kind == "file":
        row = conn.execute(
            "select not enabled as disabled, status <> 'ready' as processing, "
            "archived_at is not null as archived, deleted_at is not null as deleted, "
            "exists (select 1 from kb.exclusions x where x.workspace_id = f.workspace_id and "
            "x.user_id = %(user)s and x.target_kind = 'file' and x.target_id = f.id) as excluded, "
            "coalesce((select not c.enabled from search.file_chunks c where c.workspace_id = "
            "f.workspace_id and c.file_id = f.id and c.n = %(n)s), false) as chunk_disabled "
            "from kb.files f where f.workspace_id = %(ws)s and f.id = %(id)s",
            params | {"n": chunk},
        ).fetchone()
    else:
        row = conn.execute(
            "select archived_at is not null as archived, deleted_at is not null as deleted, "
            "exists (select 1 from kb.exclusions x where x.workspace_id = m.workspace_id and "
            "x.user_id = %(user)s and x.target_kind = 'mail' and x.target_id = m.id) as excluded "
            "from kb.mail m where m.workspace_id = %(ws)s and m.id = %(id)s",
            params,
        ).fetchone()
    labels = {
        "archived": "archived", "deleted": "soft-deleted", "excluded": "excluded by you",
        "disabled": "the file is disabled", "processing": "the file is not extracted yet",
        "chunk_disabled": "this chunk is disabled",
    }  # fmt: skip
    return [f"filtered: {labels[k]}" for k, v in (row or {}).items() if v]


def _tag_reasons(conn: Conn, scope: Scope, kind: str, ident: UUID) -> list[str]:
    table = {"page": "kb.pages", "file": "kb.files", "mail": "kb.mail"}[kind]
    reasons = []
    for tag in scope.tags:
        single = replace(scope, tags=[tag])  # one filter at a time, to name the one that fails
        row = conn.execute(
            f"select 1 from {table} t where t.workspace_id = %(ws)s and t.id = %(id)s"
            f"{tag_predicates(single, 't', kind)}",
            single.params() | {"id": ident},
        ).fetchone()
        if row is None:
            shown = " and ".join(map(str, tag.values))
            reasons.append(f"filtered: tag {tag.name} {tag.op} {shown}")
    return reasons


@dataclass(frozen=True)
class ExplainRequest:
    """What explaining one target needs from a search: its scope, its query, and what each
    step made of it."""

    target: str  # a ref (node:<id>, file:<id>:2) or an id, as the user gave it
    scope: Scope
    tsq: TsQueries
    candidates: Sequence[Fused]  # every fused candidate, before grouping and paging
    page: Sequence[Fused]  # the page shown
    served: AbstractSet[str]  # cursor keys of the targets earlier pages served
    legs: Sequence[Leg]
    window: int  # candidates each leg drew per source and knowledge base
    provider: EmbeddingProvider | None


def explain_target(conn: Conn, request: ExplainRequest) -> dict[str, Any]:
    """Why the request's target is or is not among the results."""
    scope, spec, tsq, window = request.scope, request.target, request.tsq, request.window
    parsed = _parse_target(conn, scope.workspace_id, spec)
    if parsed is None:
        return {"target": spec, "shown": False, "reasons": ["not found in this workspace"]}
    kind, ident, chunk = parsed
    key = (kind, ident)
    for position, item in enumerate(request.page, start=1):
        if item.target == key:
            return {"target": spec, "shown": True, "reasons": [f"shown at position {position}"]}
    if f"{kind[0]}{ident.hex}" in request.served:
        return {"target": spec, "shown": False, "reasons": ["served on an earlier page"]}
    holder = _item(conn, scope.workspace_id, kind, ident)
    if holder is None:
        return {"target": spec, "shown": False, "reasons": ["not found in this workspace"]}
    item_kind, item_id, kb_id = holder
    reasons = _visibility_reasons(conn, scope, item_kind, item_id, chunk)
    if kb_id not in scope.kb_ids:
        reasons.append(f"filtered: knowledge base {scope.kb_names.get(kb_id, kb_id)} not searched")
    if kind == "node":
        memory = conn.execute(
            "select props->'memory' = 'true'::jsonb as m from kb.nodes where workspace_id = %s "
            "and id = %s",
            (scope.workspace_id, ident),
        ).fetchone()
        node_kind = "memory" if memory and memory["m"] else "node"
        if node_kind not in scope.kinds:
            reasons.append(f"filtered: kind {node_kind} not searched")
    elif kind not in scope.kinds:
        reasons.append(f"filtered: kind {kind} not searched")
    reasons += _tag_reasons(conn, scope, item_kind, item_id)
    if reasons:
        return {"target": spec, "shown": False, "reasons": reasons}
    for leg in request.legs:
        ranks = [r for r, h in enumerate(dedupe(leg.hits), start=1) if h.target == key]
        if not leg.ran:
            reasons.append(f"{leg.name} leg: did not run ({leg.error})")
        elif ranks:
            reasons.append(f"{leg.name} leg: rank {ranks[0]}")
        elif leg.name == "lexical":
            reasons.append(_lexical_absence(conn, scope, kind, ident, tsq, window))
        else:
            reasons.append(_vector_absence(conn, scope, kind, ident, request.provider, window))
    for position, item in enumerate(request.candidates, start=1):
        if item.target == key:
            reasons.append(f"cut by the limit: fused position {position}")
    return {"target": spec, "shown": False, "reasons": reasons}


def _lexical_absence(
    conn: Conn, scope: Scope, kind: str, ident: UUID, tsq: TsQueries, window: int
) -> str:
    if not tsq.any_words:
        return "lexical leg: the query has no searchable words (only stopwords)"
    tsv = {
        "node": "select text_tsv from kb.nodes where workspace_id = %s and id = %s",
        "page": "select title_tsv from kb.pages where workspace_id = %s and id = %s",
        "file": "select c.text_tsv from search.file_chunks c where c.workspace_id = %s "
        "and c.file_id = %s",
        "mail": "select mail_tsv from kb.mail where workspace_id = %s and id = %s",
    }[kind]
    row = conn.execute(
        f"select exists (select 1 from ({tsv}) t(v) where v @@ %s::tsquery) as hit",
        (scope.workspace_id, ident, tsq.any_words),
    ).fetchone()
    if row is None or not row["hit"]:
        return "lexical leg: none of the query's words is in its text"
    if tsq.excluded:
        return (
            f"lexical leg: matched, but outside the window of {window} per source and "
            "knowledge base, or removed by an excluded word"
        )
    return f"lexical leg: matched, but cut by the cap of {window} per source and knowledge base"


def _vector_absence(
    conn: Conn,
    scope: Scope,
    kind: str,
    ident: UUID,
    provider: EmbeddingProvider | None,
    window: int,
) -> str:
    if provider is None:
        return "vector leg: no provider"
    column = "target_id"
    row = conn.execute(
        f"select count(*) as n from search.embeddings where workspace_id = %s and model = %s "
        f"and {column} = %s",
        (scope.workspace_id, provider.model, ident),
    ).fetchone()
    if row is None or not row["n"]:
        return "vector leg: not embedded yet (the indexer has not reached it)"
    return f"vector leg: outside the nearest {window} per knowledge base"
