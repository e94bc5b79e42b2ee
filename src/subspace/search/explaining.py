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
from subspace.search import registry
from subspace.search.cursors import cursor_key
from subspace.search.filters import Scope, tag_filter
from subspace.search.fragments import Fragment, bind
from subspace.search.fusion import RRF_K, Fused, Leg, dedupe
from subspace.search.hydrate import Row, hydrate
from subspace.search.lexical.terms import TsQueries
from subspace.search.refs import Ref, parse_ref


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

    `fused` holds every candidate shown or not (before grouping by page), so each hit has its
    fused row; a vector hit under the similarity floor has none and is not listed.
    """
    by_target = {item.target: item for item in fused}
    lists: dict[str, list[Row]] = {}
    for leg in legs:
        if not leg.ran:
            continue
        hits = [hit for hit in dedupe(leg.hits) if hit.target in by_target]
        items = [by_target[hit.target] for hit in hits[:limit]]
        rows = hydrate(conn, scope, items, tsq)
        explained = {item.target: row_explain(item) for item in items}
        for row in rows:
            row.explain = explained.get((registry.target_of_row(row.type), row.id))
        lists[leg.name] = rows
    return lists


# -- why is a target absent ------------------------------------------------------------------


@dataclass(frozen=True)
class _Holder:
    """The target's row as the registry sees it: its kind (a memory, not a node, when its
    props say so), its item and knowledge base, and the labels of the reasons hiding it."""

    kind: registry.KindSpec
    item_id: UUID
    kb_id: UUID
    hidden_by: tuple[str, ...]


# What a search without answers (Scope.answers: exclude) leaves out, and one for answers
# only keeps out, as explain says it.
ASKED_BY_RUN = "an answer run asked with it or wrote it (answers: exclude)"
NOT_AN_ANSWER = "no answer run asked with it or wrote it (answers: only)"


def _target_is_item(spec: registry.KindSpec) -> bool:
    """Whether the kind's targets are its items (a page, a file, a mail; not a bullet)."""
    return spec.in_item_table or spec.key == spec.item_key


def _parse_target(conn: Conn, ws: UUID, text: str) -> tuple[registry.KindSpec, Ref] | None:
    """The kind and ref `text` names; a bare id is looked up among every kind's targets."""
    ref = parse_ref(text)
    if ref is None:
        return None
    if ref.kind is not None:
        return registry.get(ref.kind.target_kind), ref
    for spec in registry.registered():
        if spec.name != spec.target_kind:
            continue  # a memory's targets are nodes
        table, key = (
            (spec.item.table, spec.item.key) if _target_is_item(spec) else (spec.table, spec.key)
        )
        row = conn.execute(
            f"select 1 from {table} where workspace_id = %s and {key} = %s", (ws, ref.id)
        ).fetchone()
        if row is not None:
            return spec, Ref(spec, ref.id)
    return None


def _holder(conn: Conn, scope: Scope, spec: registry.KindSpec, ref: Ref) -> _Holder | None:
    """The target's row, item and reasons, read with the registry's own conditions: the
    reasons the legs hide a row for are the reasons named here. None when there is no such
    target in the workspace."""
    item = spec.item
    sharing = [k for k in registry.registered() if k.target_kind == spec.target_kind]
    if _target_is_item(spec):
        source = f"{item.table} i where i.workspace_id = %(ws)s and i.{item.key} = %(id)s"
        row_alias = None
    else:
        source = (
            f"{spec.table} a join {item.table} i on {spec.item_link('a', 'i')} "
            f"where a.workspace_id = %(ws)s and a.{spec.key} = %(id)s"
        )
        row_alias = "a"
    columns = [f"i.{item.key} as item_id", f"i.{item.kb} as kb_id"]
    columns += [f"{reason.hidden('i')} as item_{n}" for n, reason in enumerate(item.reasons)]
    more = dict(zip(spec.ref[1:], ref.more, strict=False))
    for n, reason in enumerate(spec.row_reasons):
        if row_alias is not None:
            columns.append(f"{reason.hidden(row_alias)} as row_{n}")
        elif len(more) == len(spec.ref) - 1:  # the ref names one row (a file's chunk)
            wanted = "".join(f" and r.{column} = %(more_{column})s" for column in more)
            columns.append(
                f"exists (select 1 from {spec.table} r where r.workspace_id = i.workspace_id "
                f"and r.{spec.key} = i.{item.key}{wanted} and {reason.hidden('r')}) as row_{n}"
            )
    if scope.answers != "include" and spec.asked_by_run is not None and row_alias is not None:
        columns.append(f"coalesce({spec.asked_by_run(row_alias)}, false) as asked_by_run")
    for n, kind in enumerate(sharing):
        if kind.only is not None and row_alias is not None:
            columns.append(f"coalesce({kind.only(row_alias)}, false) as only_{n}")
    params = Fragment(
        "", {"id": ref.id} | {f"more_{column}": value for column, value in more.items()}
    )
    found = conn.execute(
        f"select {', '.join(columns)} from {source} limit 1",
        bind(scope.shared(), params),
    ).fetchone()
    if found is None:
        return None
    kind = next(
        (k for n, k in enumerate(sharing) if k.only is None or found.get(f"only_{n}")), spec
    )
    labels = [r.label for n, r in enumerate(item.reasons) if found[f"item_{n}"]]
    labels += [r.label for n, r in enumerate(spec.row_reasons) if found.get(f"row_{n}")]
    if scope.answers == "exclude" and found.get("asked_by_run"):
        labels.append(ASKED_BY_RUN)
    if scope.answers == "only" and not found.get("asked_by_run"):
        labels.append(NOT_AN_ANSWER)
    return _Holder(kind, found["item_id"], found["kb_id"], tuple(labels))


def _tag_reasons(conn: Conn, scope: Scope, item: registry.ItemSpec, ident: UUID) -> list[str]:
    reasons = []
    for tag in scope.tags:
        single = replace(scope, tags=[tag])  # one filter at a time, to name the one that fails
        tagged = tag_filter(single, "t", item.name, item.key)
        row = conn.execute(
            f"select 1 from {item.table} t where t.workspace_id = %(ws)s "
            f"and t.{item.key} = %(id)s{tagged.sql}",
            bind(single.shared(), tagged, Fragment("", {"id": ident})),
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
    window: int  # candidates each leg drew per knowledge base
    provider: EmbeddingProvider | None
    floor: float = 0.0  # the similarity a row only the vector leg found had to reach


def explain_target(conn: Conn, request: ExplainRequest) -> dict[str, Any]:
    """Why the request's target is or is not among the results."""
    scope, spec, tsq, window = request.scope, request.target, request.tsq, request.window
    parsed = _parse_target(conn, scope.workspace_id, spec)
    if parsed is None:
        return {"target": spec, "shown": False, "reasons": ["not found in this workspace"]}
    kind_spec, ref = parsed
    kind, ident = kind_spec.target_kind, ref.id
    key = (kind, ident)
    for position, item in enumerate(request.page, start=1):
        if item.target == key:
            return {"target": spec, "shown": True, "reasons": [f"shown at position {position}"]}
    if cursor_key(key) in request.served:
        return {"target": spec, "shown": False, "reasons": ["served on an earlier page"]}
    holder = _holder(conn, scope, kind_spec, ref)
    if holder is None:
        return {"target": spec, "shown": False, "reasons": ["not found in this workspace"]}
    reasons = [f"filtered: {label}" for label in holder.hidden_by]
    if holder.kb_id not in scope.kb_ids:
        name = scope.kb_names.get(holder.kb_id, holder.kb_id)
        reasons.append(f"filtered: knowledge base {name} not searched")
    if holder.kind.name not in scope.kinds:
        reasons.append(f"filtered: kind {holder.kind.name} not searched")
    reasons += _tag_reasons(conn, scope, kind_spec.item, holder.item_id)
    if reasons:
        return {"target": spec, "shown": False, "reasons": reasons}
    for leg in request.legs:
        ranks = [r for r, h in enumerate(dedupe(leg.hits), start=1) if h.target == key]
        if not leg.ran:
            reasons.append(f"{leg.name} leg: did not run ({leg.error})")
        elif ranks:
            reasons.append(f"{leg.name} leg: rank {ranks[0]}")
        elif leg.name == "lexical":
            reasons.append(_lexical_absence(conn, scope, kind_spec, ident, tsq, window))
        else:
            reasons.append(_vector_absence(conn, scope, kind, ident, request.provider, window))
    for position, item in enumerate(request.candidates, start=1):
        if item.target == key:
            reasons.append(f"cut by the limit: fused position {position}")
            break
    else:
        vector = next((leg for leg in request.legs if leg.name == "vector" and leg.ran), None)
        hit = next((h for h in dedupe(vector.hits) if h.target == key), None) if vector else None
        if hit is not None:
            reasons.append(
                f"only the vector leg found it, at similarity {hit.score:.3f}: under the "
                f"similarity floor {request.floor:g} (min_similarity lowers it)"
            )
    return {"target": spec, "shown": False, "reasons": reasons}


def _lexical_absence(
    conn: Conn, scope: Scope, spec: registry.KindSpec, ident: UUID, tsq: TsQueries, window: int
) -> str:
    if not tsq.any_words:
        return "lexical leg: the query has no searchable words (only stopwords)"
    if not _holds(conn, scope, spec, ident, tsq.any_words):
        return "lexical leg: none of the query's words is in its text"
    if tsq.excluded:
        return (
            f"lexical leg: matched, but outside the window of {window} per knowledge base, "
            "or removed by an excluded word"
        )
    return f"lexical leg: matched, but cut by the cap of {window} per knowledge base"


def _holds(conn: Conn, scope: Scope, spec: registry.KindSpec, ident: UUID, tsquery: str) -> bool:
    """Whether any row of the target matches `tsquery` (a file does when one of its chunks
    does)."""
    row = conn.execute(
        f"select exists (select 1 from {spec.table} a where a.workspace_id = %s "
        f"and a.{spec.key} = %s and a.{spec.tsv} @@ %s::tsquery) as hit",
        (scope.workspace_id, ident, tsquery),
    ).fetchone()
    return row is not None and bool(row["hit"])


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
