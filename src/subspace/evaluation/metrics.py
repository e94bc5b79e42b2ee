"""Ranking metrics as BEIR computes them, and whether a search answered at all. Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

Qrels = Mapping[str, Mapping[str, int]]  # query id -> document id -> relevance grade


def ndcg_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Normalised discounted cumulative gain of the first k documents (graded relevance)."""
    gains = [relevant.get(doc, 0) for doc in ranked[:k]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g > 0)
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 100) -> float:
    wanted = {doc for doc, grade in relevant.items() if grade > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0


def mrr_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    for position, doc in enumerate(ranked[:k], start=1):
        if relevant.get(doc, 0) > 0:
            return 1.0 / position
    return 0.0


def success_at(ranked: Sequence[str], relevant: Mapping[str, int], k: int = 1) -> float:
    """1.0 when one of the first k documents is relevant (any grade), else 0.0."""
    return 1.0 if any(relevant.get(doc, 0) > 0 for doc in ranked[:k]) else 0.0


@dataclass(frozen=True)
class Metric:
    """A per-query score and the queries it is averaged over: those with a relevant document
    (`answerable`), or those judged to have none, where nothing should come back."""

    score: Callable[[Sequence[str], Mapping[str, int]], float]
    answerable: bool = True


METRICS = {
    "success@1": Metric(lambda ranked, relevant: success_at(ranked, relevant, k=1)),
    "ndcg@10": Metric(lambda ranked, relevant: ndcg_at(ranked, relevant, k=10)),
    "recall@100": Metric(lambda ranked, relevant: recall_at(ranked, relevant, k=100)),
    "mrr@10": Metric(lambda ranked, relevant: mrr_at(ranked, relevant, k=10)),
    # The share of queries with an answer that returned at least one row...
    "not_empty": Metric(lambda ranked, _: float(bool(ranked))),
    # ...and of the queries judged to have none that returned no row.
    "empty": Metric(lambda ranked, _: float(not ranked), answerable=False),
}
BEIR_METRICS = ("ndcg@10", "recall@100", "mrr@10")


def evaluate(
    runs: Mapping[str, Sequence[str]],
    qrels: Qrels,
    metrics: Sequence[str] = BEIR_METRICS,
    *,
    expect_empty: Collection[str] = (),
) -> dict[str, float]:
    """The mean of each metric over its queries: the ones with a relevant document in `qrels`,
    or for "empty" the queries of `expect_empty` (judged to have no answer). A metric with no
    query to average over is 0.0.

    >>> evaluate({"q": ["b", "a"], "nothing": []}, {"q": {"a": 1}}, ["mrr@10", "empty"],
    ...          expect_empty={"nothing"})
    {'mrr@10': 0.5, 'empty': 1.0}
    """
    answerable = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    scores = {}
    for name in metrics:
        metric = METRICS[name]
        queries = answerable if metric.answerable else list(expect_empty)
        total = sum(metric.score(runs.get(q, []), qrels.get(q, {})) for q in queries)
        scores[name] = round(total / len(queries), 4) if queries else 0.0
    return scores


def misses(
    runs: Mapping[str, Sequence[str]], qrels: Qrels, *, expect_empty: Collection[str] = ()
) -> list[str]:
    """The queries a person would call missed: a first row that is not relevant (or no row)
    where there is an answer, any row where there is none.

    >>> misses({"a": ["x"], "b": ["y"], "c": ["z"]}, {"a": {"x": 1}, "b": {"x": 2}},
    ...        expect_empty={"c"})
    ['b', 'c']
    """
    missed = [q for q in qrels if not success_at(runs.get(q, []), qrels[q], k=1)]
    return sorted([*missed, *(q for q in expect_empty if runs.get(q))])


def rrf(rankings: Sequence[Sequence[str]], k: int = 60, depth: int = 100) -> list[str]:
    """Plain reciprocal-rank fusion of document rankings (for reference arms)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking[:depth], start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return [doc for doc, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
