"""A collection once it is in the eval database: what the runner searches, and how it scores."""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID


@dataclass
class Loaded:
    name: str
    queries: dict[str, str]  # query id -> text, every query to run
    qrels: dict[str, dict[str, int]]  # query id -> target -> grade, for the answerable queries
    expect_empty: frozenset[str]  # queries judged to have no answer: nothing should come back
    target_of: dict[UUID, str]  # the id of a search row -> the target it stands for
    texts: dict[str, str]  # target -> its text, which the reference arms index
    kinds: list[str] | None  # the kinds searched; None for every kind, as the palette does
    depth: int  # rows kept per query
    metrics: tuple[str, ...]  # the report's columns, names from metrics.METRICS
    cut_documents: int = 0  # documents longer than a bullet may be, searched by their start
    # Queries whose id a document has: that document is the query itself (ArguAna's queries
    # are arguments of its corpus), no answer to it, and left out of its rankings as BEIR's
    # evaluation does (its `ignore_identical_ids`).
    own_documents: frozenset[str] = frozenset()
    # query id -> the phrasings its answer must hold one of, for the queries whose answers
    # are judged (evaluation.answers)
    facts: dict[str, tuple[str, ...]] = field(default_factory=dict)
