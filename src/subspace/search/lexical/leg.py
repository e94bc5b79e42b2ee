"""The lexical leg of one search: the engine's hits with the delta's, or, while there is no
engine (it is being built), every row ranked by BM25 in Postgres; ts_rank_cd when asked.

What the leg needs before it runs (the engine's view and position, the items written since,
the user's exclusions) is queued with the search's first round trip (`prepare_lexical`);
its SQL (the delta's rows, or the fallback's) is queued with the vector leg's, and the
engine is searched while Postgres works on those (`queue_lexical_leg`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from uuid import UUID

from subspace.config import Settings
from subspace.db.pipeline import Later, flush, later, prepared
from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.filters import Scope, tag_filter
from subspace.search.fragments import Fragment, bind
from subspace.search.fusion import Hit
from subspace.search.lexical.collector import Ranked, as_hits, engine_top, from_rows, merged
from subspace.search.lexical.delta import Delta, queue_delta
from subspace.search.lexical.engine_query import EngineFilters
from subspace.search.lexical.index.integrity import engine_failed
from subspace.search.lexical.index.reader import EngineView, LexicalReader
from subspace.search.lexical.sql import bm25_sql, source_names, ts_rank_cd_sql
from subspace.search.lexical.terms import TsQueries
from subspace.search.options import RANKERS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LexicalInputs:
    """What the leg reads with the search's first round trip."""

    view: EngineView | None
    problem: str  # why there is no view ("" when there is one)
    reader: LexicalReader | None = None  # told when the engine fails on the view
    disk_full: str = ""  # why the index takes no new writes: its disk is full
    delta: Later[Delta] | None = None
    excluded: Later[frozenset[UUID]] | None = None
    max_lag_s: float = 0.0


def prepare_lexical(
    conn: Conn, reader: LexicalReader | None, settings: Settings, workspace_id: UUID,
    user_id: UUID, *, ranker: str,
) -> LexicalInputs:  # fmt: skip
    """The engine's view and, with one, the statements the leg needs, queued."""
    if ranker != "bm25":
        return LexicalInputs(None, "")
    if reader is None:
        return LexicalInputs(None, "no index")
    view, disk_full = reader.view(workspace_id), reader.disk_full()
    if view is None:
        return LexicalInputs(None, "; ".join(filter(None, (reader.problem, disk_full))))
    return LexicalInputs(
        view,
        "",
        reader,
        disk_full,
        queue_delta(conn, workspace_id, view.position),
        _queue_excluded(conn, workspace_id, user_id),
        settings.lexical_max_lag_s,
    )


def _queue_excluded(conn: Conn, workspace_id: UUID, user_id: UUID) -> Later[frozenset[UUID]]:
    """The items the user's own reasons hide (their exclusions), which the engine's
    documents cannot hold."""
    listings = [
        reason.hidden_items
        for item in registry.items()
        for reason in item.reasons
        if reason.hidden_items is not None
    ]
    if not listings:
        return Later(frozenset)
    return prepared(
        conn,
        " union ".join(dict.fromkeys(listings)),
        {"ws": workspace_id, "user": user_id},
        lambda rows: frozenset(next(iter(r.values())) for r in rows),
    )


@dataclass
class LexicalRun:
    """The leg's hits, and what a reader of the results should know about how it ran."""

    hits: list[Hit]
    note: str | None = None  # degraded: ranked without the engine, or the engine far behind
    behind: Delta | None = field(default=None)


def queue_lexical_leg(
    conn: Conn, scope: Scope, tsq: TsQueries, inputs: LexicalInputs, *, cap: int, ranker: str
) -> Later[LexicalRun]:
    """The leg's statements queued; `.result()` searches the engine, then reads them."""
    if ranker not in RANKERS:
        raise ValueError(f"unknown ranker {ranker!r}")
    if tsq.is_empty or not scope.kb_ids or not source_names(scope):
        return Later(lambda: LexicalRun([]))
    if ranker != "bm25":
        query = ts_rank_cd_sql(scope, tsq, cap=cap)
        ranked = later(conn, query.sql, query.params, from_rows)
        return Later(lambda: LexicalRun(as_hits(merged([ranked.result()], cap))))
    if inputs.view is None:
        averages = {name: size.average_length for name, size in tsq.sizes.items()}
        query = bm25_sql(scope, tsq, averages, cap=cap)
        ranked = later(conn, query.sql, query.params, from_rows)
        note = _fallback_note(inputs.problem)
        return Later(lambda: LexicalRun(as_hits(merged([ranked.result()], cap)), note))
    view = inputs.view
    assert inputs.delta is not None and inputs.excluded is not None
    delta, excluded = inputs.delta.result(), inputs.excluded.result()
    tagged = _queue_tagged(conn, scope) if scope.tags else None
    averages = {s: stats.average_length for s, stats in view.stats.items()}
    for size_source, size in tsq.sizes.items():  # a source the engine holds nothing of yet
        averages.setdefault(size_source, size.average_length)
    written = None
    if delta.items:
        query = bm25_sql(scope, tsq, averages, cap=cap, items=sorted(delta.items))
        written = later(conn, query.sql, query.params, from_rows)
    # Something to read before the engine is searched: reading sends every statement queued
    # (the vector leg's too), which Postgres then works on while the engine runs. Its result
    # comes at once, not after the statements queued behind it.
    sent = tagged or written or prepared(conn, "select 1", None, lambda rows: rows)
    flush(conn)

    def run() -> LexicalRun:
        sent.result()
        only = tagged.result() if tagged is not None else None
        try:
            found = _engine_rankings(view, tsq, scope, excluded | delta.items, only, cap)
        except BaseException as exc:  # the index damaged or gone under the search
            if not (isinstance(exc, Exception) or engine_failed(exc)):
                raise  # an interrupt, not a failure
            # A damaged file can make the engine raise, panic or hand back values of any
            # sort, so the reader checks the files. The engine's own errors rank in Postgres
            # whatever the check finds; another error the files do not explain is ours.
            damaged = inputs.reader is not None and inputs.reader.failed(view, exc)
            if not (damaged or engine_failed(exc)):
                raise
            log.warning("lexical index unreadable, ranking in Postgres: %s", exc)
            return _ranked_in_postgres(conn, scope, tsq, cap, "the index could not be read")
        if written is not None:
            found.append(written.result())
        note = None
        if delta.oldest_s > inputs.max_lag_s or inputs.disk_full:
            note = (
                f"the lexical index is {delta.events:,} writes ({delta.oldest_s:,.0f} s) "
                "behind; they are ranked from Postgres"
            )
            if inputs.disk_full:
                note = f"{inputs.disk_full}: {note}"
        return LexicalRun(as_hits(merged(found, cap)), note, delta)

    return Later(run)


def _engine_rankings(
    view: EngineView, tsq: TsQueries, scope: Scope, left_out: frozenset[UUID],
    only: frozenset[UUID] | None, cap: int,
) -> list[list[Ranked]]:  # fmt: skip
    """The engine's best targets of each source in each knowledge base of the scope."""
    filters = EngineFilters(scope.kinds, scope.answers, left_out, only)
    return [engine_top(view, tsq, source, scope.kb_ids, filters, cap)
            for source in source_names(scope)]  # fmt: skip


def _ranked_in_postgres(
    conn: Conn, scope: Scope, tsq: TsQueries, cap: int, problem: str
) -> LexicalRun:
    """Every row in scope ranked by BM25 in Postgres, with the workspace's own average
    lengths: the leg without an engine."""
    averages = {name: size.average_length for name, size in tsq.sizes.items()}
    query = bm25_sql(scope, tsq, averages, cap=cap)
    ranked = later(conn, query.sql, query.params, from_rows)
    return LexicalRun(as_hits(merged([ranked.result()], cap)), _fallback_note(problem))


def _fallback_note(problem: str) -> str:
    return f"ranked in Postgres until the lexical index is rebuilt ({problem})"


def _queue_tagged(conn: Conn, scope: Scope) -> Later[frozenset[UUID]]:
    """The items in scope carrying every tag filter, the statement queued: the engine keeps
    only their documents."""
    parts = []
    for item in registry.items():
        if not any(spec.name in scope.kinds for spec in registry.of_item(item.name)):
            continue
        i = item.alias
        tags = tag_filter(scope, i, item.name, item.key)
        parts.append(
            Fragment(
                f"select {i}.{item.key} as id from {item.table} {i} where {i}.workspace_id = "
                f"%(ws)s and {i}.{item.kb} = any(%(kbs)s){tags.sql}",
                bind(scope.shared(), tags),
            )
        )
    query = Fragment(" union ".join(p.sql for p in parts), bind(*parts))
    return later(conn, query.sql, query.params, lambda rows: frozenset(r["id"] for r in rows))
