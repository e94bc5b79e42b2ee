"""Ranking metrics as BEIR computes them. Pure: no I/O."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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


def evaluate(runs: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over the judged queries."""
    judged = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    if not judged:
        return {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    totals = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for query in judged:
        ranked = runs.get(query, [])
        totals["ndcg@10"] += ndcg_at(ranked, qrels[query])
        totals["recall@100"] += recall_at(ranked, qrels[query])
        totals["mrr@10"] += mrr_at(ranked, qrels[query])
    return {name: round(value / len(judged), 4) for name, value in totals.items()}


def rrf(rankings: Sequence[Sequence[str]], k: int = 60, depth: int = 100) -> list[str]:
    """Plain reciprocal-rank fusion of document rankings (for reference arms)."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking[:depth], start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return [doc for doc, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
