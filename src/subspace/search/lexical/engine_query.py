"""The lexical leg's query as the engine runs it, for one source and knowledge base: the
documents matching the query and every filter of the scope, scored by BM25 with the
workspace's statistics.

Each workspace has indexes of its own (index/layout.py), so no workspace's documents weigh
on another's scores. Tantivy's own idf still counts the deleted documents not yet merged
away; each term's query is boosted by the workspace's idf over the engine's, so a score is
the workspace's BM25 (search/lexical/bm25.py). The average length is the engine's, the
workspace's own index's: the delta scores with it too (search/lexical/collector.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from uuid import UUID

from tantivy import Occur, Query

from subspace.search import registry
from subspace.search.lexical import bm25
from subspace.search.lexical.index.layout import (
    ANSWER,
    ANSWER_YES,
    HIDDEN,
    HIDDEN_ANY,
    ITEM,
    KB,
    KIND,
    SCHEMA,
    TEXT,
)
from subspace.search.lexical.index.reader import EngineView
from subspace.search.lexical.sql import ALL_WORDS_CLAUSES, weights
from subspace.search.lexical.terms import Phrase, TsQueries


@dataclass(frozen=True)
class EngineFilters:
    """What a search may see of one source, beyond the query: the kinds wanted, the answer
    rows (options.ANSWERS), the items to leave out (the user's exclusions, the delta's) and,
    with tag filters, the only items to keep."""

    kinds: frozenset[str]
    answers: str
    left_out: frozenset[UUID]
    only_items: frozenset[UUID] | None = None


def _term(lexeme: str) -> Query:
    return Query.term_query(SCHEMA, TEXT, lexeme, index_option="position")


def _unscored(query: Query) -> Query:
    return Query.const_score_query(query, 0.0)


def _either(queries: Iterable[Query]) -> Query | None:
    found = [(Occur.Should, q) for q in queries]
    if not found:
        return None
    return found[0][1] if len(found) == 1 else Query.boolean_query(found)


def _matching(phrase: Phrase) -> Query:
    """The documents holding the phrase (a word: its lexeme), or the word it was corrected to."""
    if len(phrase.words) == 1:
        found = _term(phrase.words[0][1])
    else:
        found = Query.phrase_query(SCHEMA, TEXT, list(phrase.words))
    if phrase.correction is None:
        return found
    return Query.boolean_query([(Occur.Should, found), (Occur.Should, _term(phrase.correction))])


def _set(field: str, values: Collection[str]) -> Query:
    return Query.term_set_query(SCHEMA, field, list(values))


def scoring(view: EngineView, tsq: TsQueries, source: str) -> list[Query]:
    """One boosted term query per lexeme the engine's index of `source` holds."""
    stats = view.stats.get(source)
    if stats is None:
        return []
    found = []
    for lexeme, weight in zip(tsq.lexemes, weights(tsq, source), strict=True):
        held = view.holding(source, lexeme)
        if weight <= 0 or held == 0:
            continue
        engine_idf = bm25.idf(stats.documents, held)
        found.append(Query.boost_query(_term(lexeme), weight / engine_idf))
    return found


def source_clauses(
    view: EngineView, tsq: TsQueries, source: str, filters: EngineFilters, *, every: bool = False
) -> list[tuple[Occur, Query]] | None:
    """The engine's query for `source`, all but its knowledge base: the query's terms and
    matches, and the scope's other filters; with `every`, only documents matching every
    clause. None when nothing can match. Built once a search, for each base's query
    (`in_base`)."""
    scored = scoring(view, tsq, source)
    if not scored:
        return None
    # Without phrases or corrections a document matches when it holds a scored lexeme: the
    # scoring terms are the match. Otherwise the match is required on its own, unscored, and
    # the terms only score (beside a required clause, Tantivy's optional ones only score).
    plain = not tsq.phrases and not tsq.corrections
    terms = _either(scored)
    assert terms is not None
    clauses: list[tuple[Occur, Query]] = [(Occur.Must if plain and not every else Occur.Should,
                                           terms)]  # fmt: skip
    if every:
        for phrases in tsq.clauses:
            matched = _either(_matching(p) for p in phrases)
            assert matched is not None
            clauses.append((Occur.Must, _unscored(matched)))
    elif not plain:
        matched = _either(_matching(p) for c in tsq.clauses for p in c)
        assert matched is not None
        clauses.append((Occur.Must, _unscored(matched)))
    excluded = _either(_matching(p) for p in tsq.negated)
    if excluded is not None:
        clauses.append((Occur.MustNot, excluded))
    return clauses + _filtered(source, filters)


def in_base(clauses: list[tuple[Occur, Query]], kb: UUID) -> Query:
    """The query of `source_clauses` in knowledge base `kb`."""
    base = (Occur.Must, _unscored(Query.term_query(SCHEMA, KB, kb.hex)))
    return Query.boolean_query([*clauses, base])


def source_query(
    view: EngineView, tsq: TsQueries, source: str, kb: UUID, filters: EngineFilters,
    *, every: bool = False,
) -> Query | None:  # fmt: skip
    """The engine's query for `source` in knowledge base `kb` (see `source_clauses`)."""
    clauses = source_clauses(view, tsq, source, filters, every=every)
    return None if clauses is None else in_base(clauses, kb)


def _filtered(source: str, filters: EngineFilters) -> list[tuple[Occur, Query]]:
    """The scope's filters but the base as clauses: visibility, kinds, answers, items."""
    declared = registry.of_source(source)
    found: list[tuple[Occur, Query]] = [
        (Occur.MustNot, Query.term_query(SCHEMA, HIDDEN, HIDDEN_ANY))
    ]
    wanted = [spec.name for spec in declared if spec.name in filters.kinds]
    if len(wanted) < len(declared):
        found.append((Occur.Must, _unscored(_set(KIND, wanted))))
    if filters.answers != "include" and any(spec.asked_by_run for spec in declared):
        answer = Query.term_query(SCHEMA, ANSWER, ANSWER_YES)
        occur = Occur.Must if filters.answers == "only" else Occur.MustNot
        found.append((occur, _unscored(answer) if occur == Occur.Must else answer))
    if filters.left_out:
        found.append((Occur.MustNot, _set(ITEM, [i.hex for i in filters.left_out])))
    if filters.only_items is not None:
        found.append((Occur.Must, _unscored(_set(ITEM, [i.hex for i in filters.only_items]))))
    return found


def every_first(tsq: TsQueries) -> bool:
    """Whether documents matching every clause rank first: a short lookup (one clause: every
    match does)."""
    return 0 < len(tsq.clauses) <= ALL_WORDS_CLAUSES
