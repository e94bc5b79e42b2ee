"""Reciprocal-rank fusion with fair tie-breaking. Pure: no I/O.

Each leg ranks targets (a node, a page title, a file, a mail); a target scores
sum(weight / (k + rank)) over the legs that found it. Rank n in one leg ties rank n in the
other, so ties are common and the order inside a tie decides what a small limit shows. A tie
group is drained round-robin: take the candidate whose least-served leg has been served least
so far, where a row found by several legs counts as served by each of them; when that still
ties, the earlier leg (lexical) wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

RRF_K = 60  # the rank constant of the original RRF paper; damps the very top ranks
SCORE_DIGITS = 12  # scores equal to this many digits form one tie group

TargetKey = tuple[str, UUID]  # the target a row counts as: ("node" | "page" | "file" | "mail", id)


class Hit(NamedTuple):
    """One leg's candidate: what it points at and how the leg scored it. A tuple: each leg
    makes hundreds a search."""

    target: TargetKey
    kind: str  # page, node, memory, file or mail
    ref: str  # the chunk that matched, e.g. file:<id>:3
    kb_id: UUID
    item_id: UUID  # the page, file or mail holding it
    score: float  # the leg's raw score (rank score, or cosine similarity)


@dataclass
class Leg:
    """A leg's ranked hits, best first. `error` says why it did not run."""

    name: str
    hits: list[Hit] = field(default_factory=list)
    weight: float = 1.0
    error: str | None = None
    ms: float = 0.0
    plan: str | None = None  # how the leg ran, e.g. the vector leg's "index" or "exact"
    note: str | None = None  # how it ran degraded, if it did (said in `degraded`)

    @property
    def ran(self) -> bool:
        return self.error is None


class FusionTerm(NamedTuple):
    """One leg's term of a fused score: weight / (k + rank)."""

    leg: str
    rank: int
    weight: float
    value: float  # weight / (k + rank)


@dataclass
class Fused:
    """A fused row: its score, the hits that made it, and how a tie was broken."""

    target: TargetKey
    score: float
    hits: dict[str, tuple[int, Hit]]  # leg -> (rank, hit)
    # leg -> its weight in the fusion: every leg's, one dict for all the rows of a fusion
    weights: dict[str, float] = field(default_factory=dict)
    k: int = RRF_K
    tie_group: int = 1  # how many candidates shared this score
    tie_reason: str = ""
    more_on_page: int = 0  # when grouping by page: other matches on the same page
    answer: bool = False  # an answer run asked with it or wrote it (search/derived.py)

    @property
    def terms(self) -> list[FusionTerm]:
        """The terms of the score, one per leg that found the row (made when explained: a
        search fuses hundreds of rows and explains ten)."""
        return [
            FusionTerm(leg, rank, self.weights[leg], self.weights[leg] / (self.k + rank))
            for leg, (rank, _) in self.hits.items()
        ]

    @property
    def best_hit(self) -> Hit:
        """The hit to show: the lexical one when there is one (it holds the matched words)."""
        return next(iter(self.hits.values()))[1]


def dedupe(hits: Sequence[Hit]) -> list[Hit]:
    """Keep the first (best) hit of each target, so all chunks of a file are one row."""
    seen: set[TargetKey] = set()
    kept = []
    for hit in hits:
        if hit.target not in seen:
            seen.add(hit.target)
            kept.append(hit)
    return kept


def fuse(legs: Sequence[Leg], *, k: int = RRF_K) -> list[Fused]:
    """Every target of every leg, in fused order (deterministic for the same input).

    `legs` come in priority order: the first wins a complete tie. Their names are distinct.
    """
    order = [leg.name for leg in legs]
    weights = {leg.name: leg.weight for leg in legs}
    # One dictionary lookup a hit: a search fuses hundreds, and each lookup hashes a UUID in
    # Python (fusion was a tenth of a search's Python before).
    rows: dict[TargetKey, Fused] = {}
    for leg in legs:
        name, weight, rank = leg.name, leg.weight, 0
        for hit in leg.hits:
            row = rows.get(hit.target)
            if row is None:
                row = rows[hit.target] = Fused(hit.target, 0.0, {}, weights, k)
            elif name in row.hits:
                continue  # a later chunk of a target this leg already ranked (dedupe)
            rank += 1
            row.hits[name] = (rank, hit)
            row.score += weight / (k + rank)
    groups: dict[float, list[Fused]] = {}
    for row in rows.values():
        groups.setdefault(round(row.score, SCORE_DIGITS), []).append(row)
    served = dict.fromkeys(order, 0)
    result: list[Fused] = []
    for score in sorted(groups, reverse=True):
        group = groups[score]
        if len(group) == 1:  # no tie, nothing to decide: most rows
            row = group[0]
            for leg_name in row.hits:
                served[leg_name] += 1
            result.append(row)
            continue
        size = len(group)
        pool = sorted(group, key=lambda r: _rank_key(r, order))
        while pool:
            chosen, reason = _pick(pool, served, order)
            pool.remove(chosen)
            chosen.tie_group = size
            chosen.tie_reason = reason
            for leg_name in chosen.hits:
                served[leg_name] += 1
            result.append(chosen)
    return result


def _rank_key(row: Fused, order: list[str]) -> tuple[int, int, str, str]:
    """A total order for identical choices: earliest leg, best rank, then the target id."""
    leg_index = min(order.index(name) for name in row.hits)
    best_rank = min(rank for rank, _ in row.hits.values())
    return leg_index, best_rank, row.target[0], str(row.target[1])


def _pick(pool: list[Fused], served: dict[str, int], order: list[str]) -> tuple[Fused, str]:
    def need(row: Fused) -> tuple[int, int]:
        # The least-served leg among those that found the row, and that leg's priority.
        return min((served[name], order.index(name)) for name in row.hits)

    best = min(pool, key=lambda r: (need(r), _rank_key(r, order)))
    served_count, leg_index = need(best)
    return best, f"{order[leg_index]} leg had contributed {served_count} rows"
