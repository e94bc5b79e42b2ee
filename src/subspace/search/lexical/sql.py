"""The lexical leg's SQL: each source's visible rows in a search's scope, generated from the
kinds' declarations, ranked by BM25 over their generated tsvectors (the writes the engine has
not applied yet, and every row while there is no engine) or by Postgres's ts_rank_cd.

BM25 here is the engine's (search/lexical/bm25.py, `search.bm25_term`): the same idf from
the workspace's statistics, the same stored length, the average length the caller passes, so
a row scores the same whichever side ranks it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from subspace.search import registry
from subspace.search.filters import Scope, asked_by_run, item_visible
from subspace.search.fragments import Fragment, bind
from subspace.search.lexical import bm25
from subspace.search.lexical.terms import TsQueries, tsquery_literal

ALL_WORDS_CLAUSES = 3  # up to this many clauses, documents with every word rank first
# lexemes of a query that ts_rank_cd ranks by, its rarest: cover density costs the query's
# length times the rows matched (a pasted ArguAna argument of 265 lexemes took 3.5 s over
# 8,641 arguments, its 64 rarest 0.45 s), and a cover of hundreds of words says little.
COVER_LEXEMES = 64


@dataclass(frozen=True)
class Source:
    """One BM25 source's rows in a scope: its kinds wanted, and the query listing them with
    their tsvector and length.

    A bullet's page and a chunk's file are looked up row by row (`offset 0` keeps the lateral
    subquery from being flattened into a join): the planner otherwise hashes every page or
    file of the workspace to visit a hundred matches, 57 ms for a rare word among 95,000
    files.
    """

    name: str  # page, node, file, mail...; the node source also yields memories
    query: Fragment  # exposes kind, target_id, item_id, kb_id, ref, tsv, len
    kinds: list[str]  # its kinds in scope


def source_names(scope: Scope) -> list[str]:
    """The BM25 sources with kinds in scope."""
    return [
        source
        for source in registry.sources()
        if any(spec.name in scope.kinds for spec in registry.of_source(source))
    ]


def source_rows(scope: Scope, *, of_items: bool = False) -> list[Source]:
    """A Source for each BM25 source with kinds in scope, generated from their declarations;
    `of_items`: only the rows of the items bound as %(items)s."""
    found = []
    for source in source_names(scope):
        declared = registry.of_source(source)
        wanted = tuple(spec for spec in declared if spec.name in scope.kinds)
        if scope.tags:  # tag filters write their own parameters into the text
            query = _source_query(scope, declared, wanted, of_items)
        else:
            sql = _untagged_source_sql(declared, wanted, scope.answers, of_items)
            query = Fragment(sql, scope.shared().params)
        found.append(Source(source, query, [spec.name for spec in wanted]))
    return found


@functools.lru_cache(maxsize=128)
def _untagged_source_sql(
    declared: tuple[registry.KindSpec, ...],
    wanted: tuple[registry.KindSpec, ...],
    answers: str,
    of_items: bool,
) -> str:
    """The text of `_source_query` for a scope without tag filters. It depends only on the
    kinds' declarations and on which answer rows the scope wants, so it is built once per
    shape: generating it from the declarations on every search cost a third of a
    millisecond, a tenth of a rare word's lexical search."""
    kinds = frozenset(spec.name for spec in wanted)
    shape = Scope(UUID(int=0), UUID(int=0), [], {}, kinds, answers=answers)
    return _source_query(shape, declared, wanted, of_items).sql


def _source_query(
    scope: Scope,
    declared: tuple[registry.KindSpec, ...],
    wanted: tuple[registry.KindSpec, ...],
    of_items: bool = False,
) -> Fragment:
    """The rows of the `wanted` kinds of one source (they share a table: `declared` are all
    of its kinds), visible and tagged, with their tsvector and length; `of_items`: only those
    of the items in %(items)s."""
    spec, a, item = wanted[0], wanted[0].alias, wanted[0].item
    # The kind of each row: a node is a memory when its props say so.
    kind = f"'{spec.name}'"
    if len(wanted) > 1:
        kind = "case " + " ".join(f"when {_only(k, a)} then '{k.name}'" for k in wanted[1:])
        kind += f" else '{spec.name}' end"
    only = ""
    if len(wanted) < len(declared):
        picked = " or ".join(_only(k, a) for k in wanted)
        only = f" and {picked}" if len(wanted) == 1 else f" and ({picked})"
    rows = f"{a}.{spec.key} as target_id, {a}.{spec.item_key} as item_id"
    ranked = f"{spec.ref_sql(a)} as ref, {a}.{spec.tsv} as tsv, {a}.{spec.length} as len"
    own = "" if not spec.row_reasons else f" and {spec.row_visible(a)}"
    if of_items:
        own += f" and {a}.{spec.item_key} = any(%(items)s::uuid[])"
    if spec.in_item_table:
        visible = item_visible(scope, item, a)
        return Fragment(
            f"""
            select {kind} as kind, {rows}, {a}.{item.kb} as kb_id,
                   {ranked}
            from {spec.table} {a}
            where {a}.workspace_id = %(ws)s and {a}.{item.kb} = any(%(kbs)s) and {visible.sql}
            {own}{only}{asked_by_run(scope, spec, a)}""",
            bind(scope.shared(), visible),
        )
    i = item.alias
    visible = item_visible(scope, item, i)
    return Fragment(
        f"""
            select {kind} as kind, {rows}, {i}.kb_id,
                   {ranked}
            from {spec.table} {a}
            cross join lateral (select {i}.{item.kb} as kb_id from {item.table} {i}
                where {spec.item_link(a, i)}
                and {i}.{item.kb} = any(%(kbs)s) and {visible.sql} offset 0) {i}
            where {a}.workspace_id = %(ws)s{own}{only}{asked_by_run(scope, spec, a)}""",
        bind(scope.shared(), visible),
    )


def _only(spec: registry.KindSpec, alias: str) -> str:
    """SQL picking the rows of `spec` in the table it shares with the other kinds of its
    source ("true" for a kind alone in its table)."""
    return "true" if spec.only is None else spec.only(alias)


# ts_rank with every weight 1 and one lexeme gives sum(1/j^2, j = 1..tf) * 6/pi^2, found by a
# binary search in the sorted tsvector; since that sum is pi^2/6 - 1/(tf + 0.5) to well within
# rounding, tf is recovered exactly (checked for 1..255) without unnesting the document's
# tsvector, which costs ten times as much for a file-sized chunk. Every constant is float8:
# an untyped 1.2 is numeric in Postgres, and numeric arithmetic tripled the scoring time.
def _term_frequency(parameter: str) -> str:
    return (
        "round(0.6079271018540267::float8 / (1::float8 "
        f"- ts_rank('{{1,1,1,1}}', s.tsv, %({parameter})s::tsquery)) - 0.5::float8)::integer"
    )


def weights(tsq: TsQueries, source: str) -> list[float]:
    """Each of tsq.lexemes' BM25 weight in `source`: its idf from the workspace's statistics
    times how often the query has it; 0 for a lexeme no document of the source holds."""
    size = tsq.sizes.get(source)
    documents = size.documents if size is not None else 0
    return [
        tsq.repeat(i) * bm25.idf(documents, held) if (held := tsq.held(lexeme, source)) else 0.0
        for i, lexeme in enumerate(tsq.lexemes)
    ]


def _bm25_score(tsq: TsQueries, source: str, average: float) -> Fragment:
    """The BM25 score of the row at `s` (search.bm25_term per lexeme, as the engine's)."""
    params: dict[str, Any] = {}
    terms = []
    for i, (lexeme, weight) in enumerate(zip(tsq.lexemes, weights(tsq, source), strict=True)):
        if weight <= 0:
            continue
        name = f"{source}_lexeme_{i}"
        params[name] = tsquery_literal(lexeme)
        params[f"{name}_weight"] = weight
        terms.append(
            f"search.bm25_term(%({name}_weight)s::float8, {_term_frequency(name)}, s.len, "
            f"%(avgdl_{source})s::float8, %(k1)s::float8, %(b)s::float8)"
        )
    if not terms:
        return Fragment("0::float8")
    params |= {"k1": bm25.K1, "b": bm25.B, f"avgdl_{source}": average}
    return Fragment(" + ".join(terms), params)


def every_clause(tsq: TsQueries, alias: str = "s") -> Fragment:
    """Whether the row at `alias` matches every clause, for a short lookup; false otherwise."""
    if 0 < len(tsq.clauses) <= ALL_WORDS_CLAUSES:
        return Fragment(
            f"{alias}.tsv @@ %(all_words)s::tsquery",
            {"all_words": tsq.all_words or tsq.any_words},
        )
    return Fragment("false")


def _not_excluded(tsq: TsQueries, alias: str) -> Fragment:
    """`and not ...` for the query's -excluded words on the tsvector at `alias`; empty without."""
    if not tsq.excluded:
        return Fragment("")
    return Fragment(f"and not ({alias}.tsv @@ %(excluded)s::tsquery)", {"excluded": tsq.excluded})


def bm25_sql(
    scope: Scope,
    tsq: TsQueries,
    averages: dict[str, float],
    *,
    cap: int,
    items: list[UUID] | None = None,
) -> Fragment:
    """Per source and knowledge base, the best `cap` targets by (every clause, for short
    lookups; BM25 score), each source's lengths weighed against `averages[source]`: of every
    row in scope, or only of `items` (the delta). Rows are kind, target_id, item_id, kb_id,
    ref, every, score; the caller orders them (search/lexical/collector.py)."""
    return _best_targets(
        scope,
        tsq,
        lambda source: _bm25_score(tsq, source, averages.get(source, 1.0)),
        cap=cap,
        items=items,
    )


def _best_targets(
    scope: Scope,
    tsq: TsQueries,
    score_of: Callable[[str], Fragment],
    *,
    cap: int,
    items: list[UUID] | None = None,
) -> Fragment:
    """Each source's best targets per knowledge base (`_best_per_base`), scored by
    `score_of(source)`, in one statement: of every row in scope, or only of `items`."""
    every, excluded = every_clause(tsq), _not_excluded(tsq, "s")
    parts = [
        _best_per_base(source.query, every, excluded, score_of(source.name))
        for source in source_rows(scope, of_items=items is not None)
    ]
    params: dict[str, Any] = {"any_words": tsq.any_words, "cap": cap}
    if items is not None:
        params["items"] = items
    return Fragment(
        " union all ".join(p.sql for p in parts) or _NOTHING, bind(Fragment("", params), *parts)
    )


def _best_per_base(
    rows: Fragment, every: Fragment, excluded: Fragment, score: Fragment
) -> Fragment:
    """Of a source's `rows` matching the query, one row per target (the best chunk of a file
    stands for the file), then the best `cap` per knowledge base by (every clause, score)."""
    return Fragment(
        f"""
        (select kind, target_id, item_id, kb_id, ref, every, score from (
            select *, row_number() over (
                partition by kb_id order by every desc, score desc, target_id) as kb_rank
            from (
                select distinct on (s.target_id) s.kind, s.target_id, s.item_id, s.kb_id, s.ref,
                       {every.sql} as every, {score.sql} as score
                from ({rows.sql}) s
                where s.tsv @@ %(any_words)s::tsquery {excluded.sql}
                order by s.target_id, every desc, score desc, s.ref
            ) best
        ) ranked where kb_rank <= %(cap)s)""",
        bind(rows, every, excluded, score),
    )


_NOTHING = (
    "select null::text as kind, null::uuid as target_id, null::uuid as item_id, "
    "null::uuid as kb_id, null::text as ref, false as every, 0::float8 as score where false"
)


def ts_rank_cd_sql(scope: Scope, tsq: TsQueries, *, cap: int) -> Fragment:
    """The ts_rank_cd ranking: per source and knowledge base, the best `cap` targets by
    (contains every clause, for short lookups; rank). It scores every matching document."""

    def score(source: str) -> Fragment:
        weight = float(source_weight(source))  # a number of ours, written in as text
        return Fragment(
            f"ts_rank_cd(s.tsv, %(cover_words)s::tsquery) * {weight!r}::float8",
            {"cover_words": cover_words(tsq)},
        )

    return _best_targets(scope, tsq, score, cap=cap)


def cover_words(tsq: TsQueries) -> str:
    """The tsquery ts_rank_cd ranks by: the query's, or for a query of more than
    COVER_LEXEMES lexemes its rarest ones that some document holds (every lexeme still
    matches)."""
    if len(tsq.lexemes) <= COVER_LEXEMES:
        return tsq.any_words
    held = sorted((w for w in tsq.lexemes if tsq.postings(w)), key=lambda w: (tsq.postings(w), w))
    return " | ".join(tsquery_literal(w) for w in held[:COVER_LEXEMES]) or tsq.any_words


def title_kinds() -> frozenset[str]:
    """The kinds whose rows are titles (KindSpec.is_title)."""
    return frozenset(spec.name for spec in registry.registered() if spec.is_title)


def source_weight(source: str) -> float:
    """What a BM25 score of `source` counts for beside the other sources' (KindSpec.weight)."""
    return registry.of_source(source)[0].weight
