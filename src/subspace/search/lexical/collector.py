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
)
from subspace.search.lexical.query import EngineFilters, every_first, source_query
from subspace.search.lexical.sql import source_weight, title_kinds
from subspace.search.lexical.terms import TsQueries

GROWTH = 4  # how much deeper the engine is read when its first hits hold too few targets


@dataclass(frozen=True)
class Ranked:
    """One target as a source ranked it: its best row (kind, target, item and part, the ids
    as 128-bit numbers: a search ranks hundreds and shows ten, and only the hits it returns
    become UUIDs), whether it holds every clause, and its BM25 score in its source."""

    source: str
    kind: str
    target: int
    item: int
    kb_id: UUID
    part: int
    every: bool
    score: float

    @property
    def target_id(self) -> UUID:
        return UUID(int=self.target)


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
    seen = {r.target for r in found}
    return (found + [r for r in any_words if r.target not in seen])[:cap]


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
        best: dict[int, Ranked] = {}
        for ranked in _read_hits(searcher, hits, kinds, source, kb, every):
            best.setdefault(ranked.target, ranked)
        targets = sorted(best.values(), key=lambda r: (-r.score, r.target))
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
) -> list[Ranked]:
    """The hits as rows, from the numbers each document carries."""
    if not hits:
        return []
    addresses = [address for _, address in hits]
    values = [
        searcher.fast_field_values(name, addresses)
        for name in (TARGET_HI, TARGET_LO, ITEM_HI, ITEM_LO, PART, KIND_CODE)
    ]
    return [
        Ranked(
            source,
            kinds[kind],
            (target_hi << 64) | target_lo,
            (item_hi << 64) | item_lo,
            kb,
            part,
            every,
            float(score),
        )
        for (score, _), target_hi, target_lo, item_hi, item_lo, part, kind in zip(
            hits, *values, strict=True
        )
    ]


def from_rows(rows: Iterable[dict[str, Any]]) -> list[Ranked]:
    """Rows of search/lexical/sql.py's rankings as Ranked, with their source."""
    found = []
    for r in rows:
        spec = registry.get(r["kind"])
        part = int(r["ref"].rsplit(":", 1)[1]) if part_column(spec) else 0
        found.append(Ranked(spec.source, r["kind"], r["target_id"].int, r["item_id"].int,
                            r["kb_id"], part, bool(r["every"]), float(r["score"])))  # fmt: skip
    return found


def merged(lists: Iterable[Sequence[Ranked]], cap: int) -> list[Ranked]:
    """The best `cap` targets per source and knowledge base of several rankings of them (the
    engine's and the delta's, which share no item), then all in the leg's order."""
    groups: dict[tuple[str, UUID], dict[int, Ranked]] = {}
    for ranking in lists:
        for ranked in ranking:
            group = groups.setdefault((ranked.source, ranked.kb_id), {})
            kept = group.get(ranked.target)
            if kept is None or (ranked.every, ranked.score) > (kept.every, kept.score):
                group[ranked.target] = ranked
    kept_rows = []
    for group in groups.values():
        ordered = sorted(group.values(), key=lambda r: (not r.every, -r.score, r.target))
        kept_rows += ordered[:cap]
    titles = title_kinds()
    weights = {source: source_weight(source) for source, _ in groups}
    weighted = [
        r if weights[r.source] == 1 else replace(r, score=r.score * weights[r.source])
        for r in kept_rows
    ]
    weighted.sort(
        key=lambda r: (not r.every, not (r.every and r.kind in titles), -r.score, r.kind, r.target)
    )
    return weighted


def as_hits(ranked: Iterable[Ranked]) -> list[Hit]:
    """The leg's hits; a hit's score puts every clause matched above any BM25 score (for a
    short lookup), the fraction keeping the order inside each group."""
    found = []
    for r in ranked:
        spec = registry.get(r.kind)
        target = UUID(int=r.target)
        ref = spec.ref_of(target, r.part) if part_column(spec) else spec.ref_of(target)
        found.append(Hit(target=(spec.target_kind, target), kind=r.kind, ref=ref,
                         kb_id=r.kb_id, item_id=UUID(int=r.item),
                         score=float(r.every) + r.score / (1.0 + r.score)))  # fmt: skip
    return found
