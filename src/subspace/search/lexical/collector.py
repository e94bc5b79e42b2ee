"""Collecting the lexical leg's hits: per source and knowledge base, the engine's best targets
(a file is one target however many of its chunks match), the delta's rows from Postgres
merged in on the same scale, then one order for all.

The order: for a short lookup, the rows holding every clause first, and titles first among
them (KindSpec.is_title); then the score, each source's times its weight (KindSpec.weight);
ties by kind and target, as the brute force of the tests breaks them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

import tantivy

from subspace.search import kinds as registry
from subspace.search.fusion import Hit
from subspace.search.lexical.documents import part_column
from subspace.search.lexical.index import (
    ITEM_HI,
    ITEM_LO,
    KIND_CODE,
    PART,
    TARGET_HI,
    TARGET_LO,
    EngineView,
    uuid_of,
)
from subspace.search.lexical.query import EngineFilters, every_first, source_query
from subspace.search.lexical.sql import source_weight, title_kinds
from subspace.search.lexical.terms import TsQueries

GROWTH = 4  # how much deeper the engine is read when its first hits hold too few targets


@dataclass(frozen=True)
class Ranked:
    """One target as a source ranked it: its best row, whether it holds every clause, and
    its BM25 score in its source."""

    source: str
    kind: str
    target_id: UUID
    item_id: UUID
    kb_id: UUID
    ref: str
    every: bool
    score: float


def engine_top(
    view: EngineView,
    tsq: TsQueries,
    source: str,
    kb: UUID,
    filters: EngineFilters,
    cap: int,
) -> list[Ranked]:
    """The engine's best `cap` targets of `source` in `kb`: for a short lookup of several
    clauses, those holding every clause first."""
    searcher = view.searchers.get(source)
    if searcher is None:
        return []
    kinds = view.kinds[source]
    several = every_first(tsq) and len(tsq.clauses) > 1
    found: list[Ranked] = []
    if several:
        query = source_query(view, tsq, source, kb, filters, every=True)
        found = _top_targets(searcher, query, kinds, source, kb, cap, every=True)
        if len(found) >= cap:
            return found
    query = source_query(view, tsq, source, kb, filters)
    # One clause: every match holds every clause. Past three: none ranks first.
    any_words = _top_targets(
        searcher, query, kinds, source, kb, cap + len(found), every=every_first(tsq) and not several
    )
    seen = {r.target_id for r in found}
    return (found + [r for r in any_words if r.target_id not in seen])[:cap]


def _top_targets(
    searcher: tantivy.Searcher,
    query: tantivy.Query | None,
    kinds: Sequence[str],
    source: str,
    kb: UUID,
    cap: int,
    *,
    every: bool,
) -> list[Ranked]:
    """The best `cap` distinct targets `query` finds, ties broken by target id: read deeper
    while the hits read hold fewer targets, or the last one read ties the cap-th target."""
    if query is None or cap <= 0:
        return []
    limit = cap
    while True:
        hits = searcher.search(query, limit, count=False).hits
        best: dict[UUID, Ranked] = {}
        for ranked in _read_hits(searcher, hits, kinds, source, kb, every):
            best.setdefault(ranked.target_id, ranked)
        targets = sorted(best.values(), key=lambda r: (-r.score, r.target_id))
        exhausted = len(hits) < limit
        tied = len(targets) >= cap and hits and hits[-1][0] >= targets[cap - 1].score
        if exhausted or (len(targets) >= cap and not tied):
            return targets[:cap]
        limit *= GROWTH


def _read_hits(
    searcher: tantivy.Searcher,
    hits: list[tuple[Any, tantivy.DocAddress]],
    kinds: Sequence[str],
    source: str,
    kb: UUID,
    every: bool,
) -> Iterable[Ranked]:
    """The hits as rows, from the numbers each document carries."""
    if not hits:
        return []
    addresses = [address for _, address in hits]
    values = {
        name: searcher.fast_field_values(name, addresses)
        for name in (TARGET_HI, TARGET_LO, ITEM_HI, ITEM_LO, PART, KIND_CODE)
    }
    found = []
    for n, (score, _) in enumerate(hits):
        spec = registry.get(kinds[int(values[KIND_CODE][n])])  # type: ignore[arg-type]
        target = uuid_of(int(values[TARGET_HI][n]), int(values[TARGET_LO][n]))  # type: ignore[arg-type]
        item = uuid_of(int(values[ITEM_HI][n]), int(values[ITEM_LO][n]))  # type: ignore[arg-type]
        part = int(values[PART][n])  # type: ignore[arg-type]
        ref = spec.ref_of(target, part) if part_column(spec) else spec.ref_of(target)
        found.append(Ranked(source, spec.name, target, item, kb, ref, every, float(score)))
    return found


def from_rows(rows: Iterable[dict[str, Any]]) -> list[Ranked]:
    """Rows of search/lexical/sql.py's rankings as Ranked, with their source."""
    found = []
    for r in rows:
        source = registry.get(r["kind"]).source
        found.append(Ranked(source, r["kind"], r["target_id"], r["item_id"], r["kb_id"],
                            r["ref"], bool(r["every"]), float(r["score"])))  # fmt: skip
    return found


def merged(lists: Iterable[Sequence[Ranked]], cap: int) -> list[Ranked]:
    """The best `cap` targets per source and knowledge base of several rankings of them (the
    engine's and the delta's, which share no item), then all in the leg's order."""
    groups: dict[tuple[str, UUID], dict[UUID, Ranked]] = {}
    for ranking in lists:
        for ranked in ranking:
            group = groups.setdefault((ranked.source, ranked.kb_id), {})
            kept = group.get(ranked.target_id)
            if kept is None or (ranked.every, ranked.score) > (kept.every, kept.score):
                group[ranked.target_id] = ranked
    kept_rows = []
    for group in groups.values():
        ordered = sorted(group.values(), key=lambda r: (not r.every, -r.score, r.target_id))
        kept_rows += ordered[:cap]
    titles = title_kinds()
    weighted = [replace(r, score=r.score * source_weight(r.source)) for r in kept_rows]
    weighted.sort(
        key=lambda r: (
            not r.every,
            not (r.every and r.kind in titles),
            -r.score,
            r.kind,
            r.target_id,
        )
    )
    return weighted


def as_hits(ranked: Iterable[Ranked]) -> list[Hit]:
    """The leg's hits; a hit's score puts every clause matched above any BM25 score (for a
    short lookup), the fraction keeping the order inside each group."""
    return [
        Hit(
            target=(registry.target_of(r.kind), r.target_id),
            kind=r.kind,
            ref=r.ref,
            kb_id=r.kb_id,
            item_id=r.item_id,
            score=float(r.every) + r.score / (1.0 + r.score),
        )
        for r in ranked
    ]
