"""`search()`: the one retrieval path behind the palette, the API, the CLI and the agents."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from subspace.context import Context
from subspace.db.pool import Conn
from subspace.errors import InvalidInput
from subspace.indexer.status import waiting_for_embeddings
from subspace.providers.base import EmbeddingProvider
from subspace.search import explain as explaining
from subspace.search.filters import Scope, TagFilter, resolve_scope
from subspace.search.fusion import RRF_K, Fused, Leg, fuse
from subspace.search.hydrate import Row, hydrate
from subspace.search.lexical import RANKERS, TsQueries, build_tsqueries, lexical_leg
from subspace.search.query import ParsedQuery, parse_query
from subspace.search.vector import EmbeddingUnavailable, embed_query, vector_leg

log = logging.getLogger(__name__)

MODES = ("hybrid", "lexical", "vector")
# Default weight of the vector leg, by provider, from `subspace eval --sweep` on SciFact (see
# docs/benchmarks.md). Trigram vectors only know spelling: at 0.01 the vector leg cannot move
# a row of the lexical top ten (adjacent ranks there are at least 1/70 - 1/71 = 0.0002 apart,
# more than 0.01/61), so it only breaks exact ties and fills in what the lexical leg missed.
# A real model is strong on its own and does best a little below the lexical leg.
DEFAULT_VECTOR_WEIGHTS = {"fake": 0.01, "local": 0.7, "openai": 0.7}
LEGS = ("lexical", "vector")  # priority order: the lexical leg wins a complete tie
MIN_WINDOW = 100  # candidates per leg, source and knowledge base for the first 33 rows
MAX_WINDOW = 1_000
STATEMENT_TIMEOUT_MS = 10_000  # a search that takes longer than this is a bug, not a query
# Every search is planned for its own words: the connection pool's prepared statements would
# otherwise switch to one generic plan for all queries of the same shape, which cannot know
# that one word is in a third of the documents and another in two (10x slower for either).
SEARCH_SETTINGS = (
    f"set local statement_timeout = {STATEMENT_TIMEOUT_MS}; "
    "set local plan_cache_mode = force_custom_plan"
)
SECOND_CONNECTION_WAIT_S = 0.05  # how long the vector leg waits for a connection of its own

_leg_threads = ThreadPoolExecutor(max_workers=8, thread_name_prefix="vector-leg")


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


@dataclass
class LegReport:
    ran: bool
    error: str | None = None
    candidates: int = 0
    ms: float = 0.0
    plan: str | None = None
    weight: float = 1.0
    ranker: str | None = None


@dataclass
class SearchResponse:
    query: str
    mode: str
    rows: list[Row]
    legs: dict[str, LegReport]
    degraded: list[str]
    pending_embeddings: int
    is_question: bool
    next_cursor: str | None = None
    absent: dict[str, Any] | None = None
    took_ms: float = 0.0
    notes: list[str] = field(default_factory=list)
    corrections: dict[str, str] = field(default_factory=dict)  # query lexeme -> vocabulary


def default_weights(provider: EmbeddingProvider | None) -> dict[str, float]:
    vector = DEFAULT_VECTOR_WEIGHTS.get(provider.name, 1.0) if provider is not None else 1.0
    return {"lexical": 1.0, "vector": vector}


def window_for(depth: int) -> int:
    """Candidates each leg draws per source and knowledge base for rows up to `depth`.

    Stepped, so the pages of one query share a window and concatenate to one large request.
    """
    steps = math.ceil(max(1, 3 * depth) / MIN_WINDOW)
    return min(MAX_WINDOW, steps * MIN_WINDOW)


def validate(request: SearchRequest, cx: Context) -> ParsedQuery:
    settings = cx.settings
    if not isinstance(request.query, str):
        raise InvalidInput("The query must be text.")
    if len(request.query) > settings.max_query_chars:
        raise InvalidInput(
            f"The query is {len(request.query):,} characters; the limit is "
            f"{settings.max_query_chars:,} (SUBSPACE_MAX_QUERY_CHARS). Shorten it."
        )
    if request.ranker is not None and request.ranker not in RANKERS:
        raise InvalidInput(f"Unknown ranker {request.ranker!r}. Use one of: {', '.join(RANKERS)}.")
    if request.mode not in MODES:
        raise InvalidInput(f"Unknown mode {request.mode!r}. Use one of: {', '.join(MODES)}.")
    if not 1 <= request.limit <= settings.max_search_limit:
        raise InvalidInput(
            f"limit must be between 1 and {settings.max_search_limit}, got {request.limit}."
        )
    for leg, weight in (request.weights or {}).items():
        if leg not in LEGS:
            raise InvalidInput(f"Unknown leg {leg!r} in weights. Use: lexical, vector.")
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            raise InvalidInput(f"The weight of the {leg} leg must be a number >= 0.")
    parsed = parse_query(request.query)
    if parsed.is_empty:
        if parsed.negated:
            raise InvalidInput(
                "The query only excludes words. Add at least one word to search for."
            )
        if not (request.tags or request.kinds or request.kb_ids):
            raise InvalidInput("The query is empty. Type something to search for.")
    return parsed


def search(
    cx: Context, provider: EmbeddingProvider | None, request: SearchRequest
) -> SearchResponse:
    """Run one search; see SearchRequest for the options and SearchResponse for the answer."""
    started = time.perf_counter()
    parsed = validate(request, cx)
    served = _decode_cursor(request)
    depth = len(served) + request.limit
    window = window_for(depth)
    weights = default_weights(provider) | (request.weights or {})
    with cx.transaction() as conn:
        conn.execute(SEARCH_SETTINGS)
        scope = resolve_scope(
            conn,
            cx.actor.workspace_id,
            cx.actor.user_id,
            kb_ids=request.kb_ids,
            kinds=request.kinds,
            tags=request.tags,
            max_knowledge_bases=cx.settings.max_knowledge_bases,
        )
        if parsed.is_empty:
            rows = explaining.browse(conn, scope, request.limit)
            return SearchResponse(
                query=parsed.text,
                mode=request.mode,
                rows=rows,
                legs={},
                degraded=[],
                pending_embeddings=waiting_for_embeddings(conn, scope.workspace_id),
                is_question=False,
                took_ms=_ms(started),
                notes=["No query: the most recently changed items that match the filters."],
            )
        tsq = TsQueries("", "", "")
        legs: list[Leg] = []
        degraded: list[str] = []
        reports: dict[str, LegReport] = {}
        ranker = request.ranker or cx.settings.lexical_ranker
        vector_job = VectorJob(
            scope, parsed, provider, window, weights["vector"], cx.settings.embed_timeout_ms
        )
        parallel: Future[Leg | None] | None = None
        if request.mode == "hybrid" and isinstance(cx.db, ConnectionPool):
            # The vector leg runs beside the lexical one, on a connection of its own.
            parallel = _leg_threads.submit(_vector_on_own_connection, cx.db, vector_job)
        if request.mode in ("hybrid", "lexical"):
            leg, tsq = _run_lexical(
                conn, scope, parsed, window, weights["lexical"], ranker, request.typos
            )
            legs.append(leg)
        if request.mode in ("hybrid", "vector"):
            vector_leg_result = parallel.result() if parallel is not None else None
            if vector_leg_result is None:
                vector_leg_result = _run_vector(conn, tsq, vector_job)
            legs.append(vector_leg_result)
        for leg in legs:
            reports[leg.name] = LegReport(
                ran=leg.ran,
                error=leg.error,
                candidates=len(leg.hits),
                ms=round(leg.ms, 2),
                plan=leg.plan,
                weight=leg.weight,
                ranker=ranker if leg.name == "lexical" else None,
            )
            if leg.error:
                degraded.append(f"{leg.name}: {leg.error}")
        fused = fuse([leg for leg in legs if leg.ran], k=RRF_K)
        candidates = fused
        if request.group_by_page:
            fused = explaining.group_by_page(conn, scope, fused, tsq)
        remaining = [f for f in fused if _key(f) not in served]
        page = remaining[: request.limit]
        rows = hydrate(conn, scope, page, tsq.any_words)
        if request.group_by_page:
            counts = {f.target: getattr(f, "more_on_page", 0) for f in page}
            for row in rows:
                row.more_on_page = counts.get(_row_target(row), 0)
        if request.explain:
            for row, item in zip(rows, [f for f in page if _visible(f, rows)], strict=False):
                row.explain = explaining.row_explain(item)
        absent = None
        if request.explain_target:
            absent = explaining.explain_target(
                conn,
                scope,
                request.explain_target,
                tsq,
                candidates,
                page,
                served,
                legs,
                window,
                provider,
            )
        next_cursor = None
        if len(remaining) > request.limit:
            next_cursor = _encode_cursor(request, served | {_key(f) for f in page})
        pending = waiting_for_embeddings(conn, scope.workspace_id)
    return SearchResponse(
        query=parsed.text,
        mode=request.mode,
        rows=rows,
        legs=reports,
        degraded=degraded,
        pending_embeddings=pending,
        is_question=parsed.is_question,
        next_cursor=next_cursor,
        absent=absent,
        took_ms=_ms(started),
        corrections=dict(tsq.corrections),
    )


def _visible(item: Fused, rows: list[Row]) -> bool:
    return any(_row_target(row) == item.target for row in rows)


def _row_target(row: Row) -> tuple[str, UUID]:
    kind = {"mem": "node"}.get(row.type, row.type)
    return kind, row.id


def _run_lexical(
    conn: Conn,
    scope: Scope,
    parsed: ParsedQuery,
    window: int,
    weight: float,
    ranker: str,
    typos: bool,
) -> tuple[Leg, TsQueries]:
    leg = Leg("lexical", weight=weight)
    tsq = TsQueries("", "", "")
    started = time.perf_counter()
    try:
        # A savepoint, so a failing leg leaves the transaction usable for the other one.
        with conn.transaction():
            tsq = build_tsqueries(conn, parsed, scope.workspace_id, typos=typos)
            leg.hits = lexical_leg(conn, scope, tsq, cap=window, ranker=ranker)
    except psycopg.Error as exc:
        log.warning("lexical leg failed: %s", exc)
        leg.error = f"failed ({type(exc).__name__})"
    leg.ms = _ms(started)
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
        query_vector = embed_query(provider, parsed.text, timeout_s=job.timeout_ms / 1000)
    except EmbeddingUnavailable as exc:
        log.warning("query embedding failed: %s", exc)
        leg.error = "timeout" if str(exc).startswith("timeout") else str(exc)
        leg.ms = _ms(started)
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
                cap=job.window,
                excluded=tsq.excluded,
            )
    except psycopg.Error as exc:
        log.warning("vector leg failed: %s", exc)
        leg.error = f"failed ({type(exc).__name__})"
    leg.ms = _ms(started)
    return leg


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


# -- cursors ----------------------------------------------------------------------------------


def _key(item: Fused) -> str:
    return f"{item.target[0][0]}{item.target[1].hex}"


def _fingerprint(request: SearchRequest) -> str:
    shape = json.dumps(
        [
            request.query,
            sorted(map(str, request.kb_ids or [])),
            sorted(request.kinds or []),
            [vars(t) for t in request.tags or []],
            request.mode,
            request.weights,
            request.ranker,
            request.typos,
            request.group_by_page,
        ],
        default=str,
        sort_keys=True,
    )
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


def _encode_cursor(request: SearchRequest, served: set[str]) -> str:
    payload = json.dumps({"v": 1, "q": _fingerprint(request), "s": sorted(served)})
    return base64.urlsafe_b64encode(zlib.compress(payload.encode())).decode().rstrip("=")


def _decode_cursor(request: SearchRequest) -> set[str]:
    """The targets already served by earlier pages of the same query."""
    if not request.cursor:
        return set()
    try:
        raw = base64.urlsafe_b64decode(request.cursor + "=" * (-len(request.cursor) % 4))
        payload = json.loads(zlib.decompress(raw))
        served = payload["s"]
        fingerprint = payload["q"]
    except (ValueError, KeyError, TypeError, zlib.error):
        raise InvalidInput("The cursor is not valid. Start again without a cursor.") from None
    if fingerprint != _fingerprint(request):
        raise InvalidInput(
            "The cursor belongs to another query or other filters. Start again without it."
        )
    return set(served)
