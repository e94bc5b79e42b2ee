"""What a search is asked and what it answers: the one contract behind every surface (the
palette, the API, the Sim endpoint, the tools, MCP, the command line, the answers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from subspace.search.filters import TagFilter
from subspace.search.hydrate import Row


@dataclass
class LegReport:
    """How one leg went: whether it ran (and why not), its candidates, time, plan, weight."""

    ran: bool
    error: str | None = None
    candidates: int = 0
    ms: float = 0.0
    plan: str | None = None
    weight: float = 1.0
    ranker: str | None = None


@dataclass
class SearchRequest:
    query: str = ""
    kb_ids: list[UUID] | None = None
    kinds: list[str] | None = None
    tags: list[TagFilter] | None = None
    mode: str = "hybrid"
    limit: int = 10
    weights: dict[str, float] | None = None
    explain: bool = False
    explain_target: str | None = None  # a ref (node:<id>, file:<id>:2) or an id
    group_by_page: bool = False
    cursor: str | None = None
    ranker: str | None = None  # bm25 or ts_rank_cd; None: SUBSPACE_LEXICAL_RANKER
    typos: bool = True  # match query words absent from the vocabulary to close ones
    answers: str = "include"  # include (below their sources), exclude or only
    # Cosine similarity a row only the vector leg found must reach; None: the setting's,
    # else the embedding model's measured floor (search/floor.py).
    min_similarity: float | None = None


@dataclass
class SearchResponse:
    query: str
    mode: str
    rows: list[Row]
    legs: dict[str, LegReport]
    # A line per leg that failed ("vector: timeout") or searched without part of the query.
    degraded: list[str]
    pending_embeddings: int
    is_question: bool
    next_cursor: str | None = None
    absent: dict[str, Any] | None = None
    took_ms: float = 0.0
    notes: list[str] = field(default_factory=list)
    # Each corrected word as the user typed it -> the word searched for instead.
    corrections: dict[str, str] = field(default_factory=dict)
    # With explain: each leg's own first `limit` rows, in its order (the fused list's parts).
    leg_rows: dict[str, list[Row]] = field(default_factory=dict)
    # The similarity floor the vector leg's own rows had to reach (None when it did not
    # run), and how many of its candidates stayed under it.
    min_similarity: float | None = None
    below_floor: int = 0
