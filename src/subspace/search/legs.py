"""The two legs of one search: the lexical leg on the search's own connection, and the vector
leg beside it on a second connection when one is free (search/lexical.py and search/vector.py
hold their SQL)."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from subspace.context import Context
from subspace.db.pool import Conn
from subspace.providers.base import EmbeddingProvider
from subspace.search.filters import Scope
from subspace.search.fusion import Leg
from subspace.search.lexical import TsQueries, build_tsqueries, lexical_leg
from subspace.search.query import ParsedQuery
from subspace.search.runtime import SearchRuntime
from subspace.search.vector import EmbeddingUnavailable, embed_query, vector_leg

log = logging.getLogger(__name__)

STATEMENT_TIMEOUT_MS = 10_000  # a search that takes longer than this is a bug, not a query
# Every search is planned for its own words: the connection pool's prepared statements would
# otherwise switch to one generic plan for all queries of the same shape, which cannot know
# that one word is in a third of the documents and another in two (10x slower for either).
SEARCH_SETTINGS = (
    f"set local statement_timeout = {STATEMENT_TIMEOUT_MS}; "
    "set local plan_cache_mode = force_custom_plan"
)
SECOND_CONNECTION_WAIT_S = 0.05  # how long the vector leg waits for a connection of its own


@dataclass
class LegReport:
    ran: bool
    error: str | None = None
    candidates: int = 0
    ms: float = 0.0
    plan: str | None = None
    weight: float = 1.0
    ranker: str | None = None


@dataclass(frozen=True)
class LegPlan:
    """What the legs are asked: the query in its scope, how deep each leg draws, and how
    much each counts."""

    scope: Scope
    parsed: ParsedQuery
    mode: str
    window: int  # candidates per leg, source and knowledge base (service.window_for)
    weights: dict[str, float]
    ranker: str  # the lexical leg's: bm25 or ts_rank_cd
    typos: bool
    provider: EmbeddingProvider | None


@dataclass
class LegsRun:
    """The legs that ran (or failed), in priority order, and the lexical leg's queries."""

    legs: list[Leg]
    tsq: TsQueries  # empty when the lexical leg did not run or failed
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
        """A line per leg that failed: a degraded search answers with the other leg."""
        return [f"{leg.name}: {leg.error}" for leg in self.legs if leg.error]


def run_legs(conn: Conn, cx: Context, plan: LegPlan) -> LegsRun:
    """The lexical leg on `conn`, the vector leg beside it on a connection of its own when the
    mode is hybrid and one is free at once (else after it, on `conn`)."""
    legs: list[Leg] = []
    tsq = TsQueries("", "", "")
    vector_job = VectorJob(
        plan.scope,
        plan.parsed,
        plan.provider,
        plan.window,
        plan.weights["vector"],
        cx.settings.embed_timeout_ms,
        cx.search_runtime,
    )
    parallel: Future[Leg | None] | None = None
    if plan.mode == "hybrid" and isinstance(cx.db, ConnectionPool):
        parallel = cx.search_runtime.leg_threads.submit(
            _vector_on_own_connection, cx.db, vector_job
        )
    if plan.mode in ("hybrid", "lexical"):
        leg, tsq = _run_lexical(conn, plan)
        legs.append(leg)
    if plan.mode in ("hybrid", "vector"):
        vector = parallel.result() if parallel is not None else None
        legs.append(vector if vector is not None else _run_vector(conn, tsq, vector_job))
    return LegsRun(legs, tsq, plan.ranker)


def _run_lexical(conn: Conn, plan: LegPlan) -> tuple[Leg, TsQueries]:
    leg = Leg("lexical", weight=plan.weights["lexical"])
    tsq = TsQueries("", "", "")
    started = time.perf_counter()
    try:
        # A savepoint, so a failing leg leaves the transaction usable for the other one.
        with conn.transaction():
            tsq = build_tsqueries(conn, plan.parsed, plan.scope.workspace_id, typos=plan.typos)
            leg.hits = lexical_leg(conn, plan.scope, tsq, cap=plan.window, ranker=plan.ranker)
    except psycopg.Error as exc:
        log.warning("lexical leg failed: %s", exc)
        leg.error = f"failed ({type(exc).__name__})"
    leg.ms = elapsed_ms(started)
    return leg, tsq


@dataclass(frozen=True)
class VectorJob:
    """What the vector leg needs, so it can run on either connection."""

    scope: Scope
    parsed: ParsedQuery
    provider: EmbeddingProvider | None
    window: int
    weight: float
    timeout_ms: int
    runtime: SearchRuntime


def _vector_on_own_connection(pool: ConnectionPool[Conn], job: VectorJob) -> Leg | None:
    """The vector leg on a second connection; None when none is free at once (the caller
    then runs it on its own connection, so searches never wait on each other for one)."""
    try:
        with pool.connection(timeout=SECOND_CONNECTION_WAIT_S) as conn, conn.transaction():
            conn.execute(SEARCH_SETTINGS)
            no_query = TsQueries("", "", "")  # exclusions, if any, are parsed by the leg
            return _run_vector(conn, no_query, job)
    except PoolTimeout:
        return None


def _run_vector(conn: Conn, tsq: TsQueries, job: VectorJob) -> Leg:
    scope, parsed, provider = job.scope, job.parsed, job.provider
    leg = Leg("vector", weight=job.weight)
    started = time.perf_counter()
    if provider is None:
        leg.error = "no embedding provider"
        return leg
    try:
        query_vector = embed_query(
            job.runtime, provider, parsed.text, timeout_s=job.timeout_ms / 1000
        )
    except EmbeddingUnavailable as exc:
        log.warning("query embedding failed (%s): %s", exc.reason, exc)
        leg.error = exc.reason
        leg.ms = elapsed_ms(started)
        return leg
    try:
        with conn.transaction():
            if parsed.negated and not tsq.excluded:
                tsq = build_tsqueries(conn, parsed)
            leg.hits, leg.plan = vector_leg(
                conn,
                scope,
                query_vector,
                model=provider.model,
                dimensions=provider.dimensions,
                cap=job.window,
                excluded=tsq.excluded,
                large_bases=job.runtime.large_bases,
            )
    except psycopg.Error as exc:
        log.warning("vector leg failed: %s", exc)
        leg.error = f"failed ({type(exc).__name__})"
    leg.ms = elapsed_ms(started)
    return leg


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() reading), as reports show them."""
    return round((time.perf_counter() - started) * 1000, 2)
