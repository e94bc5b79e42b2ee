"""`search()`: the one retrieval path behind the palette, the API, the CLI and the agents."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from subspace.commands.tags import MAX_TAG_TEXT_CHARS
from subspace.context import Context
from subspace.db.pool import Conn
from subspace.errors import InvalidCursor, InvalidInput, TooLarge
from subspace.indexer.status import waiting_for_embeddings
from subspace.providers.base import EmbeddingProvider
from subspace.search import explaining
from subspace.search.browsing import browse
from subspace.search.cursors import is_clean, seal, unseal, workspace_secret
from subspace.search.filters import Scope, TagFilter, resolve_scope
from subspace.search.fusion import RRF_K, Fused, Leg, fuse
from subspace.search.grouping import group_by_page
from subspace.search.hydrate import Row, hydrate
from subspace.search.lexical import CONFIG as LEXICAL_CONFIG
from subspace.search.lexical import TsQueries, build_tsqueries, lexical_leg
from subspace.search.options import MODES, RANKERS
from subspace.search.query import ParsedQuery, parse_query
from subspace.search.runtime import SearchRuntime
from subspace.search.vector import EmbeddingUnavailable, embed_query, vector_leg

log = logging.getLogger(__name__)

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
# A cursor lists every target its pages served, so it grows with the depth paged: ten pages at
# the largest default limit (100), a hundred at the usual 10, and as many as one leg draws
# per source at MAX_WINDOW. Past that the query wants narrowing, not another page. A target
# is 36 bytes of JSON ('"n<32 hex>",'): 1,000 of them inflate to 36,036 bytes and encode to
# 26,524 characters (measured), so anything beyond the caps below was not issued here.
MAX_CURSOR_TARGETS = 1_000
MAX_CURSOR_INFLATED_BYTES = 40 * 1024
MAX_CURSOR_CHARS = 48 * 1024
_TARGET_KEY = re.compile(r"[a-z][0-9a-f]{32}")
MAX_TAG_NAME_CHARS = 100  # as create_tag allows
MAX_NAME_CHARS = 200  # kinds, operators, explain targets: names and refs, never prose


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
    # Each corrected word as the user typed it -> the word searched for instead.
    corrections: dict[str, str] = field(default_factory=dict)
    # With explain: each leg's own first `limit` rows, in its order (the fused list's parts).
    leg_rows: dict[str, list[Row]] = field(default_factory=dict)


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
    """The parsed query, once every option is of the right type and within its limits.

    Nothing with a NUL or a lone surrogate reaches the driver: it is refused here, as is a
    request larger than its limits (each string is bounded, and so is the number of filters).
    """
    settings = cx.settings
    if not isinstance(request.query, str):
        raise InvalidInput("The query must be text.")
    if len(request.query) > settings.max_query_chars:
        raise InvalidInput(
            f"The query is {len(request.query):,} characters; the limit is "
            f"{settings.max_query_chars:,} (SUBSPACE_MAX_QUERY_CHARS). Shorten it."
        )
    _check_text(request.query, "The query", settings.max_query_chars)
    _check_kinds(request.kinds)
    _check_tags(request.tags, settings.max_tag_filters)
    if request.explain_target is not None:
        _check_text(request.explain_target, "explain_target", MAX_NAME_CHARS)
    if isinstance(request.limit, bool) or not isinstance(request.limit, int):
        raise InvalidInput(f"limit must be a whole number, got {request.limit!r}.")
    if request.ranker is not None and request.ranker not in RANKERS:
        raise InvalidInput(f"Unknown ranker {request.ranker!r}. Use one of: {', '.join(RANKERS)}.")
    if request.mode not in MODES:
        raise InvalidInput(f"Unknown mode {request.mode!r}. Use one of: {', '.join(MODES)}.")
    if not 1 <= request.limit <= settings.max_search_limit:
        raise InvalidInput(
            f"limit must be between 1 and {settings.max_search_limit} "
            f"(SUBSPACE_MAX_SEARCH_LIMIT), got {request.limit}. Ask for at most "
            f"{settings.max_search_limit}."
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


def _check_text(value: object, what: str, max_chars: int) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, got {type(value).__name__}.")
    if len(value) > max_chars:
        raise TooLarge(
            f"{what} is {len(value):,} characters; the limit is {max_chars:,}. Shorten it."
        )
    if not is_clean(value, max_chars):
        raise InvalidInput(
            f"{what} contains a NUL byte or a lone surrogate, which cannot be searched. Remove it."
        )


def _check_kinds(kinds: object) -> None:
    # A string is refused rather than read as a one-item list: "file" would otherwise be
    # taken letter by letter, and every surface (API, tools, CLI) sends a list.
    if kinds is None:
        return
    if not isinstance(kinds, list):
        raise InvalidInput('kinds must be a list of kind names, e.g. ["file"].')
    for kind in kinds:
        _check_text(kind, "Each kind", MAX_NAME_CHARS)


def _check_tags(tags: object, max_filters: int) -> None:
    if tags is None:
        return
    if not isinstance(tags, list):
        raise InvalidInput("tags must be a list of tag filters.")
    if len(tags) > max_filters:
        raise TooLarge(
            f"The search has {len(tags):,} tag filters; the limit is {max_filters} "
            "(SUBSPACE_MAX_TAG_FILTERS). Use fewer filters."
        )
    for tag in tags:
        if not isinstance(tag, TagFilter):
            raise InvalidInput("Each tag filter needs a tag, an op and a value.")
        _check_text(tag.tag, "A tag filter's tag name", MAX_TAG_NAME_CHARS)
        _check_text(tag.op, "A tag filter's operator", MAX_NAME_CHARS)
        for value in (tag.value, tag.value2):
            if isinstance(value, str):
                _check_text(value, f"The value of tag filter {tag.tag!r}", MAX_TAG_TEXT_CHARS)
            elif isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"The value of tag filter {tag.tag!r} must be a finite number.")


def search(
    cx: Context, provider: EmbeddingProvider | None, request: SearchRequest
) -> SearchResponse:
    """Run one search; see SearchRequest for the options and SearchResponse for the answer."""
    response = _search(cx, provider, request)
    if cx.on_search is not None:
        cx.on_search(response)
    return response


def _search(
    cx: Context, provider: EmbeddingProvider | None, request: SearchRequest
) -> SearchResponse:
    started = time.perf_counter()
    parsed = validate(request, cx)
    weights = default_weights(provider) | (request.weights or {})
    with cx.transaction() as conn:
        conn.execute(SEARCH_SETTINGS)
        # The cursor's key is read only when a cursor comes in or a next one goes out.
        secret = workspace_secret(conn, cx.actor.workspace_id) if request.cursor else None
        served = _decode_cursor(request, secret) if secret is not None else set()
        depth = len(served) + request.limit
        window = window_for(depth)
        scope = resolve_scope(
            conn,
            cx.actor.workspace_id,
            cx.actor.user_id,
            kb_ids=request.kb_ids,
            kinds=request.kinds,
            tags=request.tags,
            max_knowledge_bases=cx.settings.max_knowledge_bases,
            sources_only=cx.sources_only,
        )
        if parsed.is_empty:
            rows = browse(conn, scope, request.limit)
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
            scope,
            parsed,
            provider,
            window,
            weights["vector"],
            cx.settings.embed_timeout_ms,
            cx.search_runtime,
        )
        parallel: Future[Leg | None] | None = None
        if request.mode == "hybrid" and isinstance(cx.db, ConnectionPool):
            # The vector leg runs beside the lexical one, on a connection of its own.
            parallel = cx.search_runtime.leg_threads.submit(
                _vector_on_own_connection, cx.db, vector_job
            )
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
            fused = group_by_page(conn, scope, fused, tsq)
        remaining = [f for f in fused if _key(f) not in served]
        page = remaining[: request.limit]
        rows = hydrate(conn, scope, page, tsq)
        if request.group_by_page:
            counts = {f.target: getattr(f, "more_on_page", 0) for f in page}
            for row in rows:
                row.more_on_page = counts.get(_row_target(row), 0)
        leg_rows: dict[str, list[Row]] = {}
        if request.explain:
            for row, item in zip(rows, [f for f in page if _visible(f, rows)], strict=False):
                row.explain = explaining.row_explain(item)
            leg_rows = explaining.leg_lists(
                conn, scope, legs, candidates, request.limit, tsq
            )
        absent = None
        if request.explain_target:
            absent = explaining.explain_target(
                conn,
                explaining.ExplainRequest(
                    target=request.explain_target,
                    scope=scope,
                    tsq=tsq,
                    candidates=candidates,
                    page=page,
                    served=served,
                    legs=legs,
                    window=window,
                    provider=provider,
                ),
            )
        next_cursor = None
        notes: list[str] = []
        if len(remaining) > request.limit:
            served_now = served | {_key(f) for f in page}
            if len(served_now) + request.limit > MAX_CURSOR_TARGETS:
                notes.append(
                    f"Results are paged up to {MAX_CURSOR_TARGETS:,}; narrow the query or "
                    "add filters to see what lies deeper."
                )
            else:
                secret = secret or workspace_secret(conn, cx.actor.workspace_id)
                next_cursor = _encode_cursor(request, served_now, secret)
        pending = waiting_for_embeddings(conn, scope.workspace_id)
        corrections = _user_corrections(conn, parsed, tsq.corrections)
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
        notes=notes,
        corrections=corrections,
        leg_rows=leg_rows,
    )


def _user_corrections(conn: Conn, parsed: ParsedQuery, lexemes: dict[str, str]) -> dict[str, str]:
    """The typo corrections as words: {"biomateirals": "biomaterials"}, not the stems the
    vocabulary holds ("biomateir" -> "biomateri").

    The corrected word is the user's word with its stem swapped for the correction's, kept
    only when it stems back to the correction; otherwise the correction's stem is shown.
    """
    if not lexemes:
        return {}
    words = [t.strip() for t in parsed.alternatives if " " not in t.strip()]
    guesses = {
        (word, stem): fix + word.lower()[len(stem) :]
        for word in words
        for stem, fix in lexemes.items()
        if word.lower().startswith(stem)
    }
    texts = list(dict.fromkeys([*words, *guesses.values()]))
    rows = conn.execute(
        f"select t, tsvector_to_array(to_tsvector('{LEXICAL_CONFIG}', t)) as l "
        "from unnest(%s::text[]) t",
        (texts,),
    ).fetchall()
    stems_of = {r["t"]: list(r["l"]) for r in rows}
    found: dict[str, str] = {}
    for word in words:
        stems = stems_of.get(word, [])
        if len(stems) != 1 or stems[0] not in lexemes:
            continue
        stem, fix = stems[0], lexemes[stems[0]]
        guess = guesses.get((word, stem))
        found[word] = guess if guess is not None and stems_of.get(guess) == [fix] else fix
    return found


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
                large_bases=job.runtime.large_bases,
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


def _encode_cursor(request: SearchRequest, served: set[str], secret: bytes) -> str:
    return seal(secret, {"v": 2, "q": _fingerprint(request), "s": sorted(served)})


def _decode_cursor(request: SearchRequest, secret: bytes) -> set[str]:
    """The targets already served by earlier pages of the same query; InvalidCursor (400)
    for a cursor of any other shape, or one this workspace did not sign."""
    payload = unseal(
        secret,
        request.cursor,
        what="cursor",
        max_chars=MAX_CURSOR_CHARS,
        max_inflated=MAX_CURSOR_INFLATED_BYTES,
    )
    served = payload.get("s") if isinstance(payload, dict) else None
    if (
        not isinstance(served, list)
        or len(served) > MAX_CURSOR_TARGETS
        or not all(isinstance(k, str) and _TARGET_KEY.fullmatch(k) for k in served)
        or not isinstance(payload.get("q"), str)
    ):
        raise InvalidCursor("The cursor is not valid. Start again without a cursor.")
    if payload["q"] != _fingerprint(request):
        raise InvalidCursor(
            "The cursor belongs to another query or other filters. Start again without it."
        )
    return set(served)
