"""The two legs of one search, queued together on the search's connection so both cost one
round trip (search/lexical/ and search/vector.py hold them); what they need beforehand (the
query's lexemes and statistics, the lexical index's view and delta, the bases' sizes, the
query's embedding) is started with the search's first round trip."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TypeVar
from uuid import UUID

import psycopg
from pgvector import HalfVector

from subspace.context import Context
from subspace.db.pipeline import Later, recover, send
from subspace.db.pool import Conn
from subspace.providers.base import EmbeddingProvider
from subspace.search.filters import Scope
from subspace.search.fusion import Hit, Leg
from subspace.search.lexical.index.layout import database_identity, index_root
from subspace.search.lexical.leg import (
    LexicalInputs,
    LexicalRun,
    prepare_lexical,
    queue_lexical_leg,
)
from subspace.search.lexical.terms import TsQueries, queue_tsqueries
from subspace.search.query import ParsedQuery
from subspace.search.request import LegReport
from subspace.search.searcher import Searcher
from subspace.search.shared import LargeBases
from subspace.search.vector import (
    EmbeddingUnavailable,
    VectorLeg,
    queue_base_sizes,
    queue_vector_leg,
    start_query_embedding,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

STATEMENT_TIMEOUT_MS = 10_000  # a search that takes longer than this is a bug, not a query
# The search's transaction settings, as one statement so it can be queued (a pipeline sends
# no multi-statement text): a time limit.
SEARCH_SETTINGS = f"select set_config('statement_timeout', '{STATEMENT_TIMEOUT_MS}ms', true)"


@dataclass(frozen=True)
class LegPlan:
    """What the legs are asked: the query in its scope, how deep each leg draws, and how
    much each counts."""

    scope: Scope
    parsed: ParsedQuery
    mode: str
    window: int  # candidates per leg and knowledge base (service.base_cap)
    weights: dict[str, float]
    ranker: str  # the lexical leg's: bm25 or ts_rank_cd
    typos: bool
    provider: EmbeddingProvider | None
    walk: int  # neighbours the vector leg's walk collects for several bases together


@dataclass
class LegsRun:
    """The legs that ran (or failed), in priority order, and the lexical leg's queries."""

    legs: list[Leg]
    tsq: TsQueries  # as the lexical leg searched them; empty when it did not run or failed
    ranker: str

    def reports(self) -> dict[str, LegReport]:
        return {
            leg.name: LegReport(
                ran=leg.ran,
                error=leg.error,
                candidates=len(leg.hits),
                ms=round(leg.ms, 2),
                plan=leg.plan,
                weight=leg.weight,
                ranker=self.ranker if leg.name == "lexical" else None,
            )
            for leg in self.legs
        }

    def degraded(self) -> list[str]:
        """A line per leg that failed (a degraded search answers with the other leg) or ran
        degraded (the lexical leg without its index, or with it far behind)."""
        return [f"{leg.name}: {why}" for leg in self.legs if (why := leg.error or leg.note)]


@dataclass(frozen=True)
class Prepared:
    """What the legs need, started with the search's first round trip."""

    tsq: Later[TsQueries]
    lexical: LexicalInputs  # the lexical index's view, and what its leg reads beforehand
    sizes: Later[dict[UUID, int]] | None  # the bases' vector counts, for the vector leg
    embedding: Later[HalfVector] | None  # the query's vector, computing meanwhile
    large_bases: LargeBases | None = None  # the runtime's memory of large bases


def prepare_legs(
    conn: Conn,
    cx: Context,
    searcher: Searcher,
    parsed: ParsedQuery,
    *,
    mode: str,
    typos: bool,
    ranker: str = "bm25",
) -> Prepared:
    """Queue the query's analysis (the lexical leg's terms, the vector leg's exclusions), what
    the lexical index needs, and the bases' sizes, and start embedding the query."""
    ws = cx.actor.workspace_id
    tsq = queue_tsqueries(conn, parsed, ws, typos=typos and mode != "vector")
    lexical = LexicalInputs(None, "")
    runtime, provider = searcher.runtime, searcher.provider
    if mode != "vector":
        reader = runtime.lexical_reader(index_root(cx.settings), lambda: database_identity(conn))
        lexical = prepare_lexical(conn, reader, cx.settings, ws, cx.actor.user_id, ranker=ranker)
    if mode == "lexical" or provider is None:
        return Prepared(tsq, lexical, None, None)
    large_bases = runtime.large_bases
    sizes = queue_base_sizes(conn, ws, provider.model, large_bases)
    timeout_s = cx.settings.embed_timeout_ms / 1000
    embedding = start_query_embedding(runtime, provider, parsed.text, timeout_s=timeout_s)
    return Prepared(tsq, lexical, sizes, embedding, large_bases)


def run_legs(conn: Conn, cx: Context, plan: LegPlan, prepared: Prepared) -> LegsRun:
    """Both legs' statements queued, then read: one round trip. A leg that fails is rolled
    back to its savepoint and reported; the other still answers (if the lexical leg's failure
    cut the vector leg short, it runs again on its own)."""
    tsq = prepared.tsq.result()
    lexical: Later[LexicalRun] | None = None
    vector = None
    started = time.perf_counter()
    if plan.mode in ("hybrid", "lexical"):
        send(conn, "savepoint lexical_leg")
        lexical = queue_lexical_leg(
            conn, plan.scope, tsq, prepared.lexical, cap=plan.window, ranker=plan.ranker
        )
        send(conn, "release savepoint lexical_leg")
    vector_leg = Leg("vector", weight=plan.weights["vector"])
    if plan.mode in ("hybrid", "vector"):
        vector = _queue_vector(conn, plan, prepared, tsq, vector_leg)
    legs: list[Leg] = []
    if lexical is not None:
        leg = Leg("lexical", weight=plan.weights["lexical"])
        ran, leg.error = _read(conn, lexical, "lexical_leg")
        if ran is not None:
            leg.hits, leg.note = ran.hits, ran.note
        leg.ms = elapsed_ms(started)
        legs.append(leg)
        if leg.error and vector is not None:  # the failure aborted what was queued after it
            vector = _queue_vector(conn, plan, prepared, tsq, vector_leg)
    if plan.mode in ("hybrid", "vector"):
        if vector is not None:
            found, vector_leg.error = _read(conn, vector, "vector_leg")
            if found is not None:
                vector_leg.hits, vector_leg.plan = found
            vector_leg.ms = elapsed_ms(started)
        legs.append(vector_leg)
    # Rows are marked for the lexical leg's query only when it ran.
    ran_lexical = lexical is not None and not legs[0].error
    return LegsRun(legs, tsq if ran_lexical else TsQueries(), plan.ranker)


def _queue_vector(
    conn: Conn, plan: LegPlan, prepared: Prepared, tsq: TsQueries, leg: Leg
) -> Later[tuple[list[Hit], str]] | None:
    """The vector leg's statements queued, or None with `leg.error` said when it cannot run."""
    provider = plan.provider
    if provider is None or prepared.embedding is None:
        leg.error = "no embedding provider"
        return None
    try:
        query = prepared.embedding.result()
    except EmbeddingUnavailable as exc:
        log.warning("query embedding failed (%s): %s", exc.reason, exc)
        leg.error = exc.reason
        return None
    asked = VectorLeg(
        plan.scope,
        query,
        provider.model,
        provider.dimensions,
        plan.window,
        plan.walk,
        tsq.excluded,
        prepared.large_bases,
    )
    send(conn, "savepoint vector_leg")
    queued = queue_vector_leg(conn, asked, prepared.sizes)
    send(conn, "release savepoint vector_leg")
    return queued


def _read(conn: Conn, queued: Later[T], savepoint: str) -> tuple[T | None, str | None]:
    """A leg's result, or None and why it failed (its savepoint rolled back)."""
    try:
        return queued.result(), None
    except psycopg.Error as exc:
        log.warning("%s failed: %s", savepoint.replace("_", " "), exc)
        recover(conn, savepoint)
        return None, f"failed ({type(exc).__name__})"


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() reading), as reports show them."""
    return round((time.perf_counter() - started) * 1000, 2)
