"""Collecting the lexical leg's hits: per source and knowledge base, the engine's best targets
(a file is one target however many of its chunks match), the delta's rows from Postgres
merged in on the same scale, then each knowledge base's best and one order for all.

The order: for a short lookup, the rows holding every clause first, and titles first among
them (KindSpec.is_title); then the score, each source's times its weight (KindSpec.weight);
ties by kind and target, as the brute force of the tests breaks them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple
from uuid import UUID

import tantivy

from subspace.search import registry
from subspace.search.fusion import Hit
from subspace.search.lexical.engine_query import EngineFilters, every_first, in_base, source_clauses
from subspace.search.lexical.index.documents import part_column
from subspace.search.lexical.index.layout import (
    ITEM_HI,
    ITEM_LO,
    KIND_CODE,
    PART,
    TARGET_HI,
    TARGET_LO,
)
from subspace.search.lexical.index.reader import EngineView
from subspace.search.lexical.sql import source_weight, title_kinds
from subspace.search.lexical.terms import TsQueries

# When the hits read hold too few targets, the engine is read again as deep as the targets
# found so far say is needed, with this much to spare, and at least twice as deep.
DEPTH_SPARE = 1.25


class Ranked(NamedTuple):
    """One target as a source ranked it: its best row (kind, target, item and part, the ids
    as 128-bit numbers: a search ranks hundreds and shows ten, and only the hits it returns
    become UUIDs), whether it holds every clause, and its BM25 score in its source. A tuple:
    a search makes hundreds of them, at a third of a dataclass's cost each."""

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
    kbs: Sequence[UUID],
    filters: EngineFilters,
    cap: int,
) -> list[Ranked]:
    """The engine's best `cap` targets of `source` in each of `kbs`: for a short lookup of
    several clauses, those holding every clause first."""
    searcher = view.searchers.get(source)
    if searcher is None:
        return []
    kinds = view.kinds[source]
    several = every_first(tsq) and len(tsq.clauses) > 1
    holding_all = source_clauses(view, tsq, source, filters, every=True) if several else None
    holding_any = source_clauses(view, tsq, source, filters)
    if holding_any is None:
        return []
    found: list[Ranked] = []
    for kb in kbs:
        first: list[Ranked] = []
        if holding_all is not None:
            first = _top_targets(searcher, in_base(holding_all, kb), kinds, source, kb, cap,
                                 every=True)  # fmt: skip
            if len(first) >= cap:
                found += first
                continue
        # One clause: every match holds every clause. Past three: none ranks first.
        rest = _top_targets(searcher, in_base(holding_any, kb), kinds, source, kb,
                            cap + len(first), every=every_first(tsq) and not several)  # fmt: skip
        seen = {r.target for r in first}
        found += (first + [r for r in rest if r.target not in seen])[:cap]
    return found


def _top_targets(
    searcher: tantivy.Searcher,
    query: tantivy.Query,
    kinds: Sequence[str],
    source: str,
    kb: UUID,
    cap: int,
    *,
    every: bool,
) -> list[Ranked]:
    """The best `cap` distinct targets `query` finds (a file is one target however many of its
    chunks match): read deeper while the hits read hold fewer. Targets scoring alike are
    ranked by id among those read; past the cap, which of a run of equal scores the engine
    reads first is its own order (a common word alone scores thousands of documents alike, and
    reading them all to rank them by id cost more than the search)."""
    if cap <= 0:
        return []
    limit = cap
    while True:
        hits = searcher.search(query, limit, count=False).hits
        best: dict[int, Ranked] = {}
        for ranked in _read_hits(searcher, hits, kinds, source, kb, every):
            best.setdefault(ranked.target, ranked)
        if len(hits) < limit or len(best) >= cap:
            return sorted(best.values(), key=lambda r: (-r.score, r.target))[:cap]
        hits_per_target = len(hits) / max(1, len(best))
        limit = max(2 * limit, math.ceil(cap * hits_per_target * DEPTH_SPARE))


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
    """The leg's rows from several rankings (the engine's per source and knowledge base, and
    the delta's, which share no item): each knowledge base's best `cap` targets, its sources
    together, then all of them in the leg's order.

    A base's cap holds over its sources together: a target ranked below the cap-th of its own
    base cannot reach a page of results, and six sources' caps made six times the rows to
    fuse."""
    titles = title_kinds()
    weights: dict[str, float] = {}
    targets: dict[str, str] = {}  # kind -> the kind of target it is found as
    best: dict[tuple[UUID, str, int], tuple[tuple[Any, ...], Ranked]] = {}
    for ranking in lists:
        for ranked in ranking:
            weight = weights.get(ranked.source)
            if weight is None:
                weight = weights[ranked.source] = source_weight(ranked.source)
            if weight != 1:
                ranked = ranked._replace(score=ranked.score * weight)
            if ranked.kind not in targets:
                targets[ranked.kind] = registry.target_of(ranked.kind)
            order = _order(ranked, titles)
            key = (ranked.kb_id, targets[ranked.kind], ranked.target)
            kept = best.get(key)
            if kept is None or order < kept[0]:
                best[key] = (order, ranked)
    bases: dict[UUID, list[tuple[tuple[Any, ...], Ranked]]] = {}
    for (kb_id, _, _), entry in best.items():
        bases.setdefault(kb_id, []).append(entry)
    kept_rows = []
    for entries in bases.values():
        entries.sort(key=lambda e: e[0])
        kept_rows += entries[:cap]
    kept_rows.sort(key=lambda e: e[0])
    return [ranked for _, ranked in kept_rows]


def _order(r: Ranked, titles: frozenset[str]) -> tuple[Any, ...]:
    """The leg's order: every clause first (for a short lookup), titles first among those,
    then the weighted score, then kind and target."""
    return (not r.every, not (r.every and r.kind in titles), -r.score, r.kind, r.target)


def as_hits(ranked: Iterable[Ranked]) -> list[Hit]:
    """The leg's hits; a hit's score puts every clause matched above any BM25 score (for a
    short lookup), the fraction keeping the order inside each group."""
    found = []
    specs: dict[str, tuple[str, str, bool]] = {}  # kind -> target kind, ref prefix, parts
    for r in ranked:
        if r.kind not in specs:
            spec = registry.get(r.kind)
            specs[r.kind] = (spec.target_kind, spec.prefix, part_column(spec) is not None)
        target_kind, prefix, parts = specs[r.kind]
        target = UUID(int=r.target)
        ref = f"{prefix}:{target}:{r.part}" if parts else f"{prefix}:{target}"  # KindSpec.ref_of
        found.append(Hit(target=(target_kind, target), kind=r.kind, ref=ref, kb_id=r.kb_id,
                         item_id=UUID(int=r.item),
                         score=float(r.every) + r.score / (1.0 + r.score)))  # fmt: skip
    return found
