"""`search()`: the one retrieval path behind the palette, the API, the CLI and the agents."""

from __future__ import annotations

import math
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from psycopg_pool import PoolTimeout

from subspace.context import Context
from subspace.db.pipeline import Later, pipelined_transaction
from subspace.db.pool import Conn
from subspace.errors import InvalidInput, TooLarge
from subspace.floods import NICED_WAIT_S
from subspace.indexer.queue import queue_waiting
from subspace.providers.base import EmbeddingProvider
from subspace.search import explaining, registry
from subspace.search.browsing import browse
from subspace.search.cursors import (
    Paging,
    cursor_key,
    next_cursor,
    queue_workspace_secret,
    read_cursor,
)
from subspace.search.derived import answer_citations, below_sources, queue_has_answers
from subspace.search.filters import Scope, TagFilter, queue_knowledge_bases, resolve_scope
from subspace.search.floor import above_floor, floor_for
from subspace.search.fusion import RRF_K, Fused, TargetKey, fuse
from subspace.search.grouping import fold_attachments, group_by_page
from subspace.search.hydrate import Row, queue_hydrate
from subspace.search.legs import (
    SEARCH_SETTINGS,
    LegPlan,
    LegsRun,
    elapsed_ms,
    prepare_legs,
    run_legs,
)
from subspace.search.lexical.terms import TsQueries
from subspace.search.phrases import holding_phrases, identifiers_first
from subspace.search.query import ParsedQuery, parse_query
from subspace.search.request import SearchRequest, SearchResponse
from subspace.search.searcher import Searcher
from subspace.search.shared import SEARCH_WAIT_S
from subspace.search.steps import SearchStep, StepClock
from subspace.tag_values import MAX_TAG_TEXT_CHARS
from subspace.text import is_clean

# Default weight of the vector leg, by provider, from `subspace eval --sweep` on SciFact (see
# docs/benchmarks.md). Trigram vectors only know spelling: at 0.01 the vector leg cannot move
# a row of the lexical top ten (adjacent ranks there are at least 1/70 - 1/71 = 0.0002 apart,
# more than 0.01/61), so it only breaks exact ties and fills in what the lexical leg missed.
# A real model is strong on its own and does best below the lexical leg: MiniLM at 0.5 (0.7198
# nDCG@10; 0.7160 at 0.7, the best before a repeated query word counted as often as it
# appears); OpenAI's model, not measured here, and the same MiniLM on onnxruntime take the same.
DEFAULT_VECTOR_WEIGHTS = {"fake": 0.01, "local": 0.5, "onnx": 0.5, "openai": 0.5}
# The vector leg's weight for a query put as a question ("how do you know if a residual plot
# is good"), under a real model: a question is worded as its answer is not, and meaning finds
# what its words miss. No one weight serves both kinds (docs/benchmarks.md, "Defaults over
# every collection"): MLQuestions' questions want 1.0 or more, SciFact's claims lose 0.0055
# nDCG@10 at 0.7, the product set 0.024 at 1.0. A pasted passage, which asks for what says the
# same, takes it too: ArguAna's arguments gain 0.008 nDCG@10 at 1.0 over 0.5.
QUESTION_VECTOR_WEIGHTS = {"local": 1.0, "onnx": 1.0, "openai": 1.0}
LEGS = ("lexical", "vector")  # priority order: the lexical leg wins a complete tie
MIN_WINDOW = 100  # candidates per leg, source and knowledge base for the first 33 rows
MAX_WINDOW = 1_000
BASES_SHARE = 2  # several knowledge bases draw twice one base's window between them
MAX_TAG_NAME_CHARS = 100  # as create_tag allows
MAX_NAME_CHARS = 200  # kinds, operators, explain targets: names and refs, never prose


def default_weights(
    provider: EmbeddingProvider | None, parsed: ParsedQuery | None = None
) -> dict[str, float]:
    """Each leg's weight in the fusion: the provider's, and its question weight for a query
    that asks or is a pasted passage."""
    if provider is None:
        return {"lexical": 1.0, "vector": 1.0}
    vector = DEFAULT_VECTOR_WEIGHTS.get(provider.name, 1.0)
    if parsed is not None and (parsed.asks or parsed.is_passage):
        vector = QUESTION_VECTOR_WEIGHTS.get(provider.name, vector)
    return {"lexical": 1.0, "vector": vector}


def window_for(depth: int) -> int:
    """Candidates each leg draws from one knowledge base for rows up to `depth`.

    Stepped, so the pages of one query share a window and concatenate to one large request.
    """
    steps = math.ceil(max(1, 3 * depth) / MIN_WINDOW)
    return min(MAX_WINDOW, steps * MIN_WINDOW)


def base_cap(window: int, bases: int) -> int:
    """Candidates each leg draws per knowledge base when `bases` of them are searched with
    one base's `window`: together BASES_SHARE windows, each base at least the rows the window
    is sized for (a third of it), so one base can still fill any page it serves. Every base
    drawing a whole window made ten bases' searches rank, fuse and read ten times one base's
    rows (docs/benchmarks.md)."""
    shared = math.ceil(BASES_SHARE * window / max(1, bases))
    return min(window, max(math.ceil(window / 3), shared))


def validate(request: SearchRequest, cx: Context) -> ParsedQuery:
    """The parsed query, once every option is within what its type cannot say: the limits of
    the settings and text that can be searched.

    Nothing with a NUL or a lone surrogate reaches the driver: it is refused here, as is a
    request larger than its limits (each string is bounded, and so is the number of filters).
    """
    settings = cx.settings
    if len(request.query) > settings.max_query_chars:
        raise InvalidInput(
            f"The query is {len(request.query):,} characters; the limit is "
            f"{settings.max_query_chars:,} (SUBSPACE_MAX_QUERY_CHARS). Shorten it."
        )
    _check_text(request.query, "The query", settings.max_query_chars)
    for kind in request.kinds or []:
        _check_text(kind, "Each kind", MAX_NAME_CHARS)
    _check_tags(request.tags or [], settings.max_tag_filters)
    if request.explain_target is not None:
        _check_text(request.explain_target, "explain_target", MAX_NAME_CHARS)
    if not 1 <= request.limit <= settings.max_search_limit:
        raise InvalidInput(
            f"limit must be between 1 and {settings.max_search_limit} "
            f"(SUBSPACE_MAX_SEARCH_LIMIT), got {request.limit}. Ask for at most "
            f"{settings.max_search_limit}."
        )
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


def _check_tags(tags: list[TagFilter], max_filters: int) -> None:
    if len(tags) > max_filters:
        raise TooLarge(
            f"The search has {len(tags):,} tag filters; the limit is {max_filters} "
            "(SUBSPACE_MAX_TAG_FILTERS). Use fewer filters."
        )
    for tag in tags:
        _check_text(tag.tag, "A tag filter's tag name", MAX_TAG_NAME_CHARS)
        _check_text(tag.op, "A tag filter's operator", MAX_NAME_CHARS)
        for value in (tag.value, tag.value2):
            if isinstance(value, str):
                _check_text(value, f"The value of tag filter {tag.tag!r}", MAX_TAG_TEXT_CHARS)
            elif isinstance(value, float) and not math.isfinite(value):
                raise InvalidInput(f"The value of tag filter {tag.tag!r} must be a finite number.")


def search(cx: Context, searcher: Searcher, request: SearchRequest) -> SearchResponse:
    """Run one search; see SearchRequest for the options and SearchResponse for the answer.

    A workspace runs SEARCHES_PER_WORKSPACE at once; more wait their turn (429 after
    SEARCH_WAIT_S), so that one workspace's flood cannot take the cores from the others. A
    workspace that has had searches waiting for a while (floods.py) runs its statements on
    niced backends when one is free: in Postgres they wait for the others', and in this
    process its search waits between steps while another workspace's request runs.
    """
    with searcher.runtime.searches.hold(cx.actor.workspace_id, SEARCH_WAIT_S, searcher.cancel):
        response = _niced_search(cx, searcher, request)
        if response is None:
            with cx.running():
                response = _search(cx, searcher, request)
    if searcher.observer is not None:
        searcher.observer(response)
    return response


def _niced_search(cx: Context, searcher: Searcher, request: SearchRequest) -> SearchResponse | None:
    """For a workspace flooding the server (floods.py): the search on the yielding pool's
    niced backends, when one of its connections is free at once; else None."""
    niced = cx.niced()
    if niced is cx or not searcher.runtime.searches.flooding(cx.actor.workspace_id):
        return None
    try:
        return _search(niced, searcher, request, wait_s=NICED_WAIT_S, step_aside=True)
    except PoolTimeout:  # none free: the search runs as any other's (it holds one connection)
        return None


def _search(
    cx: Context,
    searcher: Searcher,
    request: SearchRequest,
    wait_s: float | None = None,
    *,
    step_aside: bool = False,
) -> SearchResponse:
    """validate → scope → legs (queued together) → fuse → group → hydrate → explain → cursor,
    each step timed (search/steps.py); with `step_aside`, a flood's search waits between its
    steps while another workspace's request runs in this process (floods.Precedence)."""
    clock = StepClock(searcher.cancel, cx.step_aside if step_aside else None)
    parsed = validate(request, cx)
    clock.done(SearchStep.VALIDATE)
    ws = cx.actor.workspace_id
    provider = searcher.provider
    # Three round trips: what the legs need (settings, bases, key, the embedding backlog)
    # is read at once; then the legs; then the rows, read with the commit.
    with pipelined_transaction(cx.db, wait_s) as conn, _cancellable(searcher, conn):
        conn.execute(SEARCH_SETTINGS)
        bases = queue_knowledge_bases(conn, ws)
        secret = queue_workspace_secret(conn, ws)
        pending = queue_waiting(conn, ws)
        asked = queue_has_answers(conn, ws)
        prepared = None
        if not parsed.is_empty:
            prepared = prepare_legs(
                conn, cx, searcher, parsed, mode=request.mode, typos=request.typos,
                ranker=request.ranker or cx.settings.lexical_ranker,
            )  # fmt: skip
        clock.done(SearchStep.PREPARE)
        scope = resolve_request_scope(conn, cx, request, bases, sources_only=searcher.sources_only)
        paging = read_cursor(conn, ws, request, secret=secret.result())
        clock.done(SearchStep.SCOPE)
        if prepared is None:
            return _browse(conn, scope, request, parsed, clock, pending.result())
        plan = plan_legs(cx, searcher, request, parsed, scope, paging)
        ran = run_legs(conn, cx, plan, prepared)
        clock.done(SearchStep.LEGS)
        floor = floor_for(provider, cx.settings.min_similarity, request.min_similarity)
        floored = above_floor(fuse_legs(ran), floor)
        candidates = holding_phrases(conn, ws, floored.kept, parsed.quoted)
        apart = len(floored.kept) - len(candidates)
        # In a lookup ("E0382 borrow of moved value") an identifier is what is looked for; in
        # prose or a question ("Activation of PPM1D suppresses p53 function in…") it is one
        # word among others, weighed as they are (SciFact: 0.6777 nDCG@10 with it first).
        looked_up = () if parsed.is_question else parsed.identifiers
        candidates = identifiers_first(conn, ws, candidates, looked_up)
        candidates = fold_attachments(conn, ws, candidates)
        if scope.answers == "include" and asked.result():
            candidates = below_sources(candidates, answer_citations(conn, ws, candidates))
        for item in candidates if scope.answers == "only" else ():
            item.answer = True
        clock.done(SearchStep.FUSE)
        page = group_and_page(conn, scope, candidates, ran.tsq, paging, request)
        clock.done(SearchStep.GROUP)
        hydrated = hydrate_page(conn, scope, page, ran.tsq)
        clock.done(SearchStep.HYDRATE)
        explained = Explained()
        if request.explain or request.explain_target:
            explained = explain_page(
                conn, request, plan, ran, page, hydrated.result(), paging, floored.floor
            )
            clock.done(SearchStep.EXPLAIN)
        next_page = next_cursor(conn, request, paging, page.targets, more=page.more)
        clock.done(SearchStep.CURSOR)
    rows = hydrated.result()
    clock.done(SearchStep.COMMIT)
    corrections = ran.tsq.corrected_words
    vector_ran = any(leg.name == "vector" and leg.ran for leg in ran.legs)
    notes = list(next_page.notes)
    if not rows and not paging.served and apart:
        notes.append(_phrase_apart(parsed, apart))
    elif not rows and not paging.served:
        notes.append(
            _nothing_found(parsed, corrections, ran, floored.below, floored.floor, ran.tsq.unknown)
        )
    if pending.result():
        notes.append(_not_embedded_yet(pending.result(), provider))
    return SearchResponse(
        query=parsed.text,
        mode=request.mode,
        rows=rows,
        legs=ran.reports(),
        degraded=ran.degraded(),
        pending_embeddings=pending.result(),
        is_question=parsed.is_question,
        next_cursor=next_page.cursor,
        absent=explained.absent,
        took_ms=elapsed_ms(clock.started),
        notes=notes,
        corrections=corrections,
        leg_rows=explained.leg_rows,
        min_similarity=floored.floor if vector_ran else None,
        below_floor=floored.below if vector_ran else 0,
        steps=clock.ms,
    )


def _cancellable(searcher: Searcher, conn: Conn) -> AbstractContextManager[None]:
    """The search's statements on `conn`, cancelled when its caller goes (a palette's
    superseded request)."""
    return nullcontext() if searcher.cancel is None else searcher.cancel.running_on(conn)


# -- the steps, in order ----------------------------------------------------------------------


def resolve_request_scope(
    conn: Conn,
    cx: Context,
    request: SearchRequest,
    bases: Later[dict[UUID, str]] | None = None,
    *,
    sources_only: bool = False,
) -> Scope:
    """What the caller may and asked to search: workspace, knowledge bases, kinds, tags."""
    return resolve_scope(
        conn,
        cx.actor.workspace_id,
        cx.actor.user_id,
        kb_ids=request.kb_ids,
        kinds=request.kinds,
        tags=request.tags,
        max_knowledge_bases=cx.settings.max_knowledge_bases,
        # An answer run's searches never see answers: it cites sources (answers/sources.py).
        answers="exclude" if sources_only else request.answers,
        bases=bases,
    )


def _not_embedded_yet(pending: int, provider: EmbeddingProvider | None) -> str:
    """The note for items the meaning search cannot see yet (new, edited, or all of them
    while a new model's vectors are made)."""
    model = f" with {provider.model}" if provider is not None else ""
    if pending == 1:
        items, them, are = "1 item is", "it", "it is"
    else:
        items, them, are = f"{pending:,} items are", "them", "they are"
    return (
        f"{items} not embedded{model} yet: search by meaning does not see {them} until {are}, "
        "search by words does. `subspace indexer status` shows the progress."
    )


def _browse(
    conn: Conn,
    scope: Scope,
    request: SearchRequest,
    parsed: ParsedQuery,
    clock: StepClock,
    pending: int,
) -> SearchResponse:
    """The answer without a query: the items matching the filters, no legs run."""
    rows = browse(conn, scope, request.limit)
    clock.done(SearchStep.BROWSE)
    return SearchResponse(
        query=parsed.text,
        mode=request.mode,
        rows=rows,
        legs={},
        degraded=[],
        pending_embeddings=pending,
        is_question=False,
        took_ms=elapsed_ms(clock.started),
        notes=["No query: the most recently changed items that match the filters."],
        steps=clock.ms,
    )


def plan_legs(
    cx: Context,
    searcher: Searcher,
    request: SearchRequest,
    parsed: ParsedQuery,
    scope: Scope,
    paging: Paging,
) -> LegPlan:
    """The legs' plan: the request's options over the defaults, drawn deep enough for this page."""
    window = window_for(paging.depth(request.limit))
    return LegPlan(
        scope=scope,
        parsed=parsed,
        mode=request.mode,
        window=base_cap(window, len(scope.kb_ids)),
        walk=BASES_SHARE * window,
        weights=default_weights(searcher.provider, parsed) | (request.weights or {}),
        ranker=request.ranker or cx.settings.lexical_ranker,
        typos=request.typos,
        provider=searcher.provider,
    )


def fuse_legs(ran: LegsRun) -> list[Fused]:
    """Every candidate of the legs that ran, by weighted reciprocal rank (search/fusion.py)."""
    return fuse([leg for leg in ran.legs if leg.ran], k=RRF_K)


@dataclass(frozen=True)
class ResultPage:
    """The fused candidates, and the ones this page shows."""

    candidates: list[Fused]  # every fused candidate, before grouping and paging
    items: list[Fused]  # this page's, grouped by page when asked, past what was served
    more: bool  # whether rows remain after this page
    grouped: bool  # one row per page, each counting the other matches on its page

    @property
    def targets(self) -> list[TargetKey]:
        return [item.target for item in self.items]


def group_and_page(
    conn: Conn,
    scope: Scope,
    candidates: list[Fused],
    tsq: TsQueries,
    paging: Paging,
    request: SearchRequest,
) -> ResultPage:
    """This page's candidates: grouped by page when asked, without those earlier pages served,
    at most `limit`."""
    grouped = candidates
    if request.group_by_page:
        grouped = group_by_page(conn, scope, candidates, tsq)
    remaining = [f for f in grouped if cursor_key(f.target) not in paging.served]
    more = len(remaining) > request.limit
    return ResultPage(candidates, remaining[: request.limit], more, request.group_by_page)


def hydrate_page(conn: Conn, scope: Scope, page: ResultPage, tsq: TsQueries) -> Later[list[Row]]:
    """The page's rows as shown (rows whose item vanished since ranking are left out), each
    with the count of other matches on its page when grouped; the statements queued."""
    hydrated = queue_hydrate(conn, scope, page.items, tsq)
    if not page.grouped:
        return hydrated

    def counted() -> list[Row]:
        rows = hydrated.result()
        counts = {item.target: item.more_on_page for item in page.items}
        for row in rows:
            row.more_on_page = counts.get(_row_target(row), 0)
        return rows

    return Later(counted)


@dataclass(frozen=True)
class Explained:
    """With explain: each leg's own first rows; with explain_target: why it is (not) shown."""

    leg_rows: dict[str, list[Row]] = field(default_factory=dict)
    absent: dict[str, Any] | None = None


def explain_page(
    conn: Conn,
    request: SearchRequest,
    plan: LegPlan,
    ran: LegsRun,
    page: ResultPage,
    rows: list[Row],
    paging: Paging,
    floor: float,
) -> Explained:
    """Sets each row's explanation when asked; each leg's list, and why the target is absent."""
    leg_rows: dict[str, list[Row]] = {}
    if request.explain:
        for row, item in zip(rows, [f for f in page.items if _visible(f, rows)], strict=False):
            row.explain = explaining.row_explain(item)
        leg_rows = explaining.leg_lists(
            conn, plan.scope, ran.legs, page.candidates, request.limit, ran.tsq
        )
    absent = None
    if request.explain_target:
        absent = explaining.explain_target(
            conn,
            explaining.ExplainRequest(
                target=request.explain_target,
                scope=plan.scope,
                tsq=ran.tsq,
                candidates=page.candidates,
                page=page.items,
                served=paging.served,
                legs=ran.legs,
                window=plan.window,
                provider=plan.provider,
                floor=floor,
            ),
        )
    return Explained(leg_rows, absent)


# -- helpers ----------------------------------------------------------------------------------


def _phrase_apart(parsed: ParsedQuery, apart: int) -> str:
    phrases = " and ".join(f"“{phrase}”" for phrase in parsed.quoted)
    items = "item holds" if apart == 1 else "items hold"
    return (
        f"No item holds {phrases} word for word; {apart} {items} the words apart or in "
        "another order. Search without the quotes to see them."
    )


def _nothing_found(
    parsed: ParsedQuery,
    corrections: dict[str, str],
    ran: LegsRun,
    below: int,
    floor: float,
    unknown: tuple[str, ...] = (),
) -> str:
    """Why a search found no row, as every surface says it."""
    line = f"No matches for “{parsed.text}”"
    if corrections:
        searched = " ".join(corrections.get(word, word) for word in parsed.text.split())
        line += f" (searched as “{searched}”)"
    why = []
    if unknown:
        quoted = [f"“{word}”" for word in unknown]
        words = " and ".join([", ".join(quoted[:-1]), quoted[-1]] if len(quoted) > 1 else quoted)
        verb = "is" if len(unknown) == 1 else "are"
        why.append(f"{words} {verb} like no word here, so no spelling was corrected")
    if any(leg.name == "lexical" and leg.ran for leg in ran.legs):
        why.append("no item holds its words")
    if below:
        why.append(
            f"the {below:,} nearest by meaning are under the similarity floor ({floor:g}; "
            "min_similarity or SUBSPACE_MIN_SIMILARITY lowers it)"
        )
    return line + (": " + ", and ".join(why) if why else "") + "."


def _visible(item: Fused, rows: list[Row]) -> bool:
    return any(_row_target(row) == item.target for row in rows)


def _row_target(row: Row) -> TargetKey:
    return registry.target_of_row(row.type), row.id
