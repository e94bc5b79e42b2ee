"""The lexical leg: full-text search over titles, bullets, file chunks and mail.

Two queries: the first asks Postgres to turn the parsed query into tsqueries (its own output,
so always valid), the second ranks ids and scores on the GIN-indexed tsvector columns. Text
is read only later, for the rows that survive fusion and the limit.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.search import kinds as registry
from subspace.search.filters import Scope, asked_by_run, item_visible
from subspace.search.fragments import Fragment as Fragment  # re-exported: the leg builds on it
from subspace.search.fragments import bind as bind
from subspace.search.fusion import Hit
from subspace.search.options import RANKERS
from subspace.search.query import ParsedQuery
from subspace.search.typos import correct_lexemes

CONFIG = "english"


@dataclass(frozen=True)
class Term:
    """One alternative of the query as its own tsquery, and the lexemes it matches."""

    tsquery: str
    lexemes: tuple[str, ...]


@dataclass(frozen=True)
class TsQueries:
    """The query as tsqueries: any word (recall), every clause (precision), and exclusions;
    its lexemes (for BM25) and the typo corrections applied (query lexeme -> vocabulary)."""

    any_words: str
    all_words: str
    excluded: str
    lexemes: tuple[str, ...] = ()
    corrections: dict[str, str] = field(default_factory=dict)
    clauses: int = 0
    terms: tuple[Term, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.any_words


def build_tsqueries(
    conn: Conn, parsed: ParsedQuery, workspace_id: UUID | None = None, *, typos: bool = True
) -> TsQueries:
    """Let Postgres turn each term into a tsquery, then combine them with tsquery operators.

    A term of stopwords only contributes nothing; an identifier stays one phrase. With
    `typos`, a single word that no document of the workspace contains also matches its
    closest vocabulary word. Postgres prints each term's tsquery, so the combinations built
    here from that text always parse.
    """
    if parsed.is_empty:
        return TsQueries("", "", "")
    texts = list(dict.fromkeys([*parsed.alternatives, *parsed.negated]))
    # search.fold, as for documents (migration 0009): accents folded, CJK runs as bigrams, so
    # a CJK term is the phrase of its bigrams. Identifier parts are only added to documents:
    # a whole identifier stays the phrase of its own tokens.
    rows = conn.execute(
        f"select t, array(select unnest(tsvector_to_array(to_tsvector('{CONFIG}', f)))) as l, "
        f"phraseto_tsquery('{CONFIG}', f)::text as q "
        "from unnest(%s::text[]) with ordinality u(t, i) "
        "cross join lateral (select search.fold(t) as f offset 0) folded order by i",
        (texts,),
    ).fetchall()
    lexemes_of = {r["t"]: list(r["l"]) for r in rows}
    tsquery_of: dict[str, str] = {r["t"]: r["q"] for r in rows}
    corrections: dict[str, str] = {}
    if typos and workspace_id is not None:
        single = [lexemes_of[t][0] for t in parsed.alternatives if len(lexemes_of[t]) == 1
                  and " " not in t.strip()]  # fmt: skip
        corrections = correct_lexemes(conn, workspace_id, single)

    def correction_of(text: str) -> str | None:
        words = lexemes_of[text]
        return corrections.get(words[0]) if len(words) == 1 else None

    def term(text: str) -> str:
        correction = correction_of(text)
        query = tsquery_of[text]
        if correction is None or not query:
            return query
        return f"( {query} ) | {tsquery_literal(correction)}"

    terms = []
    for text in parsed.alternatives:
        if query := term(text):
            correction = correction_of(text)
            terms.append(Term(query, (*lexemes_of[text], *([correction] if correction else []))))
    lexemes = {w for t in terms for w in t.lexemes}
    return TsQueries(
        either(t.tsquery for t in terms),
        " & ".join(f"( {q} )" for c in parsed.clauses if (q := either(map(term, c.alternatives)))),
        either(tsquery_of[t] for t in parsed.negated),
        tuple(sorted(lexemes)),
        corrections,
        len(parsed.clauses),
        tuple(terms),
    )


def either(tsqueries: Iterable[str]) -> str:
    """tsquery texts (as Postgres printed them) joined by OR, empty ones skipped; empty when
    there are none."""
    return " | ".join(f"( {q} )" for q in tsqueries if q)


BM25_K1 = 1.2  # term-frequency saturation (Lucene's default)
BM25_B = 0.75  # strength of document-length normalisation
ALL_WORDS_CLAUSES = 3  # up to this many clauses, documents with every word rank first
# Documents a BM25 query scores at most, roughly: terms are admitted to the match set from the
# rarest up until their document frequencies add up to this. The common terms left out still
# score the candidates; they only stop a long question from scoring half the corpus.
MATCH_BUDGET = 5_000
# When even the rarest term is over the budget, the shortest matching documents of each
# source, this many, are scored; an index on length finds them without reading every match.
SHORTEST_BUDGET = 500


@dataclass(frozen=True)
class Source:
    """One searchable table: its tsvector and length, its kb, its visibility.

    A bullet's page and a chunk's file are looked up row by row (`offset 0` keeps the lateral
    subquery from being flattened into a join): the planner otherwise hashes every page or
    file of the workspace to visit a hundred matches, 57 ms for a rare word among 95,000
    files.
    """

    kind: str  # its BM25 source (page, node, file, mail...); nodes also yield memory
    query: Fragment  # exposes kind, target_id, item_id, kb_id, ref, tsv, len


def _source_names(scope: Scope) -> list[str]:
    """The BM25 sources with kinds in scope."""
    return [
        source
        for source in registry.sources()
        if any(spec.name in scope.kinds for spec in registry.of_source(source))
    ]


def _sources(scope: Scope) -> list[Source]:
    """A Source for each BM25 source with kinds in scope, generated from their declarations."""
    found = []
    for source in _source_names(scope):
        declared = registry.of_source(source)
        wanted = tuple(spec for spec in declared if spec.name in scope.kinds)
        if scope.tags:  # tag filters write their own parameters into the text
            query = _source_query(scope, declared, wanted)
        else:
            sql = _untagged_source_sql(declared, wanted, scope.sources_only)
            query = Fragment(sql, scope.shared().params)
        found.append(Source(source, query))
    return found


@functools.lru_cache(maxsize=128)
def _untagged_source_sql(
    declared: tuple[registry.KindSpec, ...],
    wanted: tuple[registry.KindSpec, ...],
    sources_only: bool,
) -> str:
    """The text of `_source_query` for a scope without tag filters. It depends only on the
    kinds' declarations and on whether the scope wants sources only, so it is built once per
    shape: generating it from the declarations on every search cost a third of a
    millisecond, a tenth of a rare word's lexical search."""
    kinds = frozenset(spec.name for spec in wanted)
    shape = Scope(UUID(int=0), UUID(int=0), [], {}, kinds, sources_only=sources_only)
    return _source_query(shape, declared, wanted).sql


def _source_query(
    scope: Scope, declared: tuple[registry.KindSpec, ...], wanted: tuple[registry.KindSpec, ...]
) -> Fragment:
    """The rows of the `wanted` kinds of one source (they share a table: `declared` are all
    of its kinds), visible and tagged, with their tsvector and length."""
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


@dataclass(frozen=True)
class Bm25Stats:
    """Per source: average document length, each query lexeme's IDF and document frequency."""

    avgdl: dict[str, float]
    idf: dict[str, dict[str, float]]
    df: dict[str, dict[str, int]] = field(default_factory=dict)


def bm25_stats(conn: Conn, workspace_id: UUID, lexemes: tuple[str, ...]) -> Bm25Stats:
    """IDF = ln(1 + (N - df + 0.5) / (df + 0.5)) per source, from the trigger-kept statistics."""
    rows = conn.execute(  # one round trip: sizes, then the lexemes' document frequencies
        "select source, null as lexeme, ndocs as n, total_len from search.source_stats "
        "where workspace_id = %(ws)s union all "
        "select source, lexeme, ndoc, null from search.term_stats "
        "where workspace_id = %(ws)s and lexeme = any(%(lexemes)s)",
        {"ws": workspace_id, "lexemes": list(lexemes)},
    ).fetchall()
    sizes = {r["source"]: (int(r["n"]), int(r["total_len"])) for r in rows if r["lexeme"] is None}
    df: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["lexeme"] is not None:
            df.setdefault(r["source"], {})[r["lexeme"]] = int(r["n"])
    avgdl: dict[str, float] = {}
    idf: dict[str, dict[str, float]] = {}
    for source, (ndocs, total) in sizes.items():
        avgdl[source] = total / ndocs if ndocs else 1.0
        idf[source] = {
            lexeme: math.log(1 + (ndocs - n + 0.5) / (n + 0.5))
            for lexeme, n in df.get(source, {}).items()
            if n > 0
        }
    return Bm25Stats(avgdl, idf, df)


# ts_rank with every weight 1 and one lexeme gives sum(1/j^2, j = 1..tf) * 6/pi^2, found by a
# binary search in the sorted tsvector; since that sum is pi^2/6 - 1/(tf + 0.5) to well within
# rounding, tf is recovered exactly (checked for 1..255) without unnesting the document's
# tsvector, which costs ten times as much for a file-sized chunk. Every constant is float8:
# an untyped 1.2 is numeric in Postgres, and numeric arithmetic tripled the scoring time.
def _term_frequency(lexeme: str) -> str:
    return (
        "round(0.6079271018540267::float8 / (1::float8 "
        f"- ts_rank('{{1,1,1,1}}', s.tsv, %({lexeme})s::tsquery)) - 0.5::float8)"
    )


def _score(
    tsq: TsQueries, stats: Bm25Stats | None, source: str, lexemes: Iterable[int]
) -> Fragment:
    """The score of a document of `source`: BM25 over the query lexemes at `lexemes` (indexes
    into tsq.lexemes) with `stats`, or ts_rank_cd without them."""
    if stats is None:
        return Fragment("ts_rank_cd(s.tsv, %(any_words)s::tsquery)", {"any_words": tsq.any_words})
    # Sum over the query's lexemes of idf * tf * (k1 + 1) / (tf + K), with K the document's
    # length normalisation, written as (k1 + 1) * idf * (1 - K / (tf + K)) so tf is computed
    # once; a lexeme the document lacks has tf = 0 and adds nothing.
    avgdl = f"avgdl_{source}"
    params: dict[str, Any] = {avgdl: max(stats.avgdl.get(source, 1.0), 1.0)}
    k = f"({BM25_K1 * (1 - BM25_B)}::float8 + {BM25_K1 * BM25_B}::float8 * s.len / %({avgdl})s)"
    idf = stats.idf.get(source, {})
    terms = []
    for i in lexemes:
        # Lexeme names are shared by the sources (one value per lexeme); idf names are not.
        lexeme, weight = f"lexeme_{i}", f"idf_{source}_{i}"
        params[lexeme] = tsquery_literal(tsq.lexemes[i])
        params[weight] = idf.get(tsq.lexemes[i], 0.0)
        terms.append(f"%({weight})s * (1::float8 - {k} / ({_term_frequency(lexeme)} + {k}))")
    return Fragment(f"{BM25_K1 + 1}::float8 * ({' + '.join(terms) or '0'})", params)


def scored_lexemes(tsq: TsQueries, stats: Bm25Stats) -> dict[str, list[int]]:
    """Per source, the query lexemes (indexes into tsq.lexemes) some of its documents contain."""
    return {
        source: [i for i, lexeme in enumerate(tsq.lexemes) if stats.idf.get(source, {}).get(lexeme)]
        for source in registry.sources()
    }


def match_query(tsq: TsQueries, stats: Bm25Stats | None) -> tuple[str, bool]:
    """The tsquery candidates must match, and whether even that is over the budget.

    Every term, or for BM25 the rarest terms whose document frequencies fit the budget (at
    least the rarest one). When the rarest term alone is over the budget (a query of common
    words), the candidates are further cut to the shortest matching documents.
    """
    if stats is None:
        return tsq.any_words, False
    frequency: dict[str, int] = {}
    for by_lexeme in stats.df.values():
        for lexeme, n in by_lexeme.items():
            frequency[lexeme] = max(frequency.get(lexeme, 0), n)
    sized = sorted(
        ((max((frequency.get(w, 0) for w in t.lexemes), default=0), t.tsquery) for t in tsq.terms),
    )
    chosen: list[str] = []
    total = 0
    for df, query in sized:
        if chosen and total + df > MATCH_BUDGET:
            break
        chosen.append(query)
        total += df
    over = total > MATCH_BUDGET
    if len(chosen) == len(sized):
        return tsq.any_words, over
    return either(chosen), over


def _not_excluded(tsq: TsQueries, alias: str) -> Fragment:
    """`and not ...` for the query's -excluded words on the tsvector at `alias`; empty without."""
    if not tsq.excluded:
        return Fragment("")
    return Fragment(f"and not ({alias}.tsv @@ %(excluded)s::tsquery)", {"excluded": tsq.excluded})


def lexical_sql(
    scope: Scope,
    tsq: TsQueries,
    stats: Bm25Stats | None = None,
    *,
    cap: int = 100,
    scored: dict[str, list[int]] | None = None,
) -> Fragment:
    """The ranking query and its parameters: per source and knowledge base, the best `cap`
    targets by (contains every clause, for short lookups; rank), then all of them in one
    global order. Ranked by BM25 with `stats`, by ts_rank_cd without.

    When even the rarest term is over the budget (match_query), only the shortest matching
    documents of each source are scored (SHORTEST_BUDGET, or `cap` per knowledge base in
    scope if that is more): for common words BM25 favours short documents, and scoring a
    third of the corpus costs seconds.

    `scored` names, per source, the query lexemes its documents contain (by index into
    tsq.lexemes): a source without any is left out, and only those lexemes are scored.
    """
    match, bounded = match_query(tsq, stats)
    common = Fragment("", {"match": match, "cap": cap})
    every = (
        Fragment("s.tsv @@ %(all_words)s::tsquery", {"all_words": tsq.all_words or tsq.any_words})
        if 0 < tsq.clauses <= ALL_WORDS_CLAUSES
        else Fragment("false")
    )
    excluded = _not_excluded(tsq, "s")

    # Enough shortest documents for every base in scope to fill its window, on average.
    shortest = max(SHORTEST_BUDGET, cap * len(scope.kb_ids))

    def candidates(source: Fragment) -> Fragment:
        if not bounded:
            return Fragment(f"({source.sql})", source.params)
        # Exclusions apply before the cut, so excluded documents do not use up the budget.
        before = _not_excluded(tsq, "c")
        return Fragment(
            f"(select * from ({source.sql}) c where c.tsv @@ %(match)s::tsquery "
            f"{before.sql} order by c.len, c.target_id limit {shortest})",
            bind(source, before),
        )

    parts = []
    for source in _sources(scope):
        lexemes = range(len(tsq.lexemes)) if scored is None else scored.get(source.kind, [])
        if scored is not None and not lexemes:
            continue
        rows = candidates(source.query)
        score = _score(tsq, stats, source.kind, lexemes)
        # One row per target: the best chunk of a file stands for the file.
        parts.append(
            Fragment(
                f"""
        (select kind, target_id, item_id, kb_id, ref, every, score from (
            select *, row_number() over (
                partition by kb_id order by every desc, score desc, target_id) as kb_rank
            from (
                select distinct on (s.target_id) s.kind, s.target_id, s.item_id, s.kb_id, s.ref,
                       {every.sql} as every,
                       {score.sql} as score
                from {rows.sql} s
                where s.tsv @@ %(match)s::tsquery {excluded.sql}
                order by s.target_id, every desc, score desc, s.ref
            ) best
        ) ranked where kb_rank <= %(cap)s)""",
                bind(rows, every, score, excluded),
            )
        )
    union = " union all ".join(part.sql for part in parts)
    return Fragment(
        f"select * from ({union}) hits order by every desc, score desc, kind, target_id",
        bind(common, *parts),
    )


def tsquery_literal(lexeme: str) -> str:
    """The tsquery that matches exactly this lexeme (quoted, so no character is an operator)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def lexical_leg(
    conn: Conn, scope: Scope, tsq: TsQueries, *, cap: int, ranker: str = "bm25"
) -> list[Hit]:
    """The leg's hits, best first, at most `cap` per source and knowledge base."""
    if tsq.is_empty or not scope.kb_ids:
        return []
    if ranker not in RANKERS:
        raise ValueError(f"unknown ranker {ranker!r}")
    stats = scored = None
    if ranker == "bm25":  # leave out what no document contains: less to plan and to score
        stats = bm25_stats(conn, scope.workspace_id, tsq.lexemes)
        scored = scored_lexemes(tsq, stats)
        # Only the sources the kinds ask for count: with none of them left there is no query.
        if not any(scored[source] for source in _source_names(scope)):
            return []
    query = lexical_sql(scope, tsq, stats, cap=cap, scored=scored)
    rows = conn.execute(query.sql, query.params).fetchall()
    return [
        Hit(
            target=(registry.target_of(r["kind"]), r["target_id"]),
            kind=r["kind"],
            ref=r["ref"],
            kb_id=r["kb_id"],
            item_id=r["item_id"],
            # Every clause matched counts above any rank (for short lookups); the fraction
            # keeps the rank order inside each group.
            score=float(r["every"]) + float(r["score"]) / (1.0 + float(r["score"])),
        )
        for r in rows
    ]
