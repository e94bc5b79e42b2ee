"""BM25 as the lexical leg ranks it (by the index, and in Postgres without one) equals BM25
computed by hand; typo tolerance; ranker choice."""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.search.filters import resolve_scope
from subspace.search.lexical.bm25 import K1 as BM25_K1
from subspace.search.lexical.bm25 import B as BM25_B
from subspace.search.lexical.terms import build_tsqueries
from subspace.search.query import parse_query
from subspace.search.typos import damerau_levenshtein
from tests.search_helpers import ids, lexical_hits, run

DOCS = [
    "the ferry crossing takes twenty minutes",
    "ferry ferry ferry schedule for the harbour ferry",
    "the harbour master keeps the schedule",
    "a long note about many unrelated things such as gardens, recipes and a single ferry",
    "bridges and tunnels",
]


@pytest.mark.parametrize("engine", [True, False], ids=["index", "postgres"])
def test_bm25_scores_match_a_hand_computation(
    database: Database, cx: Context, engine: bool
) -> None:
    page = commands.create_page(cx, "")  # an empty title is not a document
    nodes = [commands.add_node(cx, page.id, text) for text in DOCS]
    with database.pool.connection() as conn:
        lexemes = {
            r["id"]: list(r["lexemes"])
            for r in conn.execute(
                "select id, (select array_agg(l) from unnest(text_tsv) u(l, p, w), "
                "lateral unnest(p) pos) as lexemes from kb.nodes"
            )
        }
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=["node"], tags=None, max_knowledge_bases=50)  # fmt: skip
        tsq = build_tsqueries(conn, parse_query("ferry schedule harbour route"),
                              cx.actor.workspace_id)  # fmt: skip
    hits = lexical_hits(database, cx, scope, tsq, cap=100, engine=engine)
    n = len(DOCS)
    avgdl = sum(len(v) for v in lexemes.values()) / n
    df = Counter(term for terms in lexemes.values() for term in set(terms))

    def bm25(terms: list[str]) -> float:
        tf = Counter(terms)
        total = 0.0
        for q in ("ferri", "schedul", "harbour", "rout"):
            if tf[q]:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                norm = BM25_K1 * (1 - BM25_B + BM25_B * len(terms) / avgdl)
                total += idf * tf[q] * (BM25_K1 + 1) / (tf[q] + norm)
        return total

    expected = sorted(
        ((bm25(lexemes[node.id]), node.id) for node in nodes if bm25(lexemes[node.id]) > 0),
        key=lambda pair: -pair[0],
    )
    got = [(h.score / (1 - h.score), h.target[1]) for h in hits]  # undo s / (1 + s)
    assert [i for _, i in got] == [i for _, i in expected]
    for (score, _), (want, _) in zip(got, expected, strict=True):
        assert score == pytest.approx(want, rel=1e-6)


def test_short_lookups_rank_documents_with_every_word_first(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Lookups")
    both = commands.add_node(
        cx, page.id, "rotate staging certificates yearly in the long procedure"
    )
    one = commands.add_node(cx, page.id, "certificates certificates certificates")
    found = ids(run(database, cx, "staging certificates", mode="lexical"))
    assert found.index(both.id) < found.index(one.id)


def test_the_ranker_is_selectable(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Rankers")
    commands.add_node(cx, page.id, "quartz meadow")
    for ranker in ("bm25", "ts_rank_cd"):
        response = run(database, cx, "quartz", mode="lexical", ranker=ranker)
        assert response.legs["lexical"].ranker == ranker
        assert len(response.rows) == 1
    with pytest.raises(Exception, match="Unknown ranker"):
        run(database, cx, "quartz", ranker="tfidf")


def test_a_misspelt_word_finds_the_right_one(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Materials")
    target = commands.add_node(cx, page.id, "Biomaterials for bone repair")
    commands.add_node(cx, page.id, "Bioreactors in tissue work")
    response = run(database, cx, "biomateirals", mode="lexical")
    assert ids(response) == [target.id]
    assert response.corrections == {"biomateirals": "biomaterials"}
    assert ids(run(database, cx, "biomateirals", mode="lexical", typos=False)) == []
    # A word that is in the vocabulary is left alone, however close another word is.
    assert run(database, cx, "bioreactors", mode="lexical").corrections == {}
    # Its second and third letters swapped: still found.
    response = run(database, cx, "boimaterials", mode="lexical")
    assert ids(response) == [target.id]
    assert response.corrections == {"boimaterials": "biomaterials"}


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("biomateir", "biomateri", 1),
        ("kitten", "sitting", 3),
        ("abc", "abc", 0),
        ("abcd", "acbd", 1),
        ("ferry", "fairy", 2),
    ],
)
def test_damerau_levenshtein(a: str, b: str, distance: int) -> None:
    assert damerau_levenshtein(a, b, 5) == distance
    assert damerau_levenshtein(a, b, 0) == (0 if distance == 0 else 1)


def test_common_words_rank_exactly_without_a_candidate_budget(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "")
    rare = commands.add_node(cx, page.id, "zymurgy notes")
    short = commands.add_node(cx, page.id, "common")
    zebras = [commands.add_node(cx, page.id, "common zebra") for _ in range(2)]
    longer = [commands.add_node(cx, page.id, f"common word in a longer bullet number {i}")
              for i in range(6)]  # fmt: skip

    def found(query: str, cap: int = 1) -> list[object]:
        with database.pool.connection() as conn:
            scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                                  kinds=["node"], tags=None, max_knowledge_bases=50)  # fmt: skip
            tsq = build_tsqueries(conn, parse_query(query), cx.actor.workspace_id)
        engine = lexical_hits(database, cx, scope, tsq, cap=cap)
        exact = lexical_hits(database, cx, scope, tsq, cap=cap, engine=False)
        # The same scores (the index's are 32-bit floats); the same documents above the last
        # one, and at it any of a tie.
        assert [h.score for h in engine] == pytest.approx([h.score for h in exact], rel=1e-5)
        above = exact[-1].score + 1e-5 if exact else 0.0
        assert [h.target for h in engine if h.score > above] == [
            h.target for h in exact if h.score > above
        ]
        return [h.target[1] for h in engine]

    # Every document scoring above the cap-th is in, ranked, equal scores by id.
    by_id = sorted(n.id for n in longer)
    assert found("zymurgy common", cap=10) == [
        rare.id, short.id, *sorted(z.id for z in zebras), *by_id
    ]  # fmt: skip
    assert found("common") == [short.id]
    assert found("common", cap=3) == [short.id, *sorted(z.id for z in zebras)]
    assert found("common -zebra", cap=20) == [short.id, *by_id]
    # A tie across the cap: which of it is read first is the index's own order (a common
    # word scores thousands alike), but those kept still rank by id.
    tied = found("common -zebra", cap=3)
    assert tied[0] == short.id
    assert tied[1:] == sorted(tied[1:])
    assert set(tied[1:]) < set(by_id)
    assert len(ids(run(database, cx, "common", mode="lexical"))) == 9


def test_each_query_fragment_binds_exactly_the_parameters_it_names(
    database: Database, cx: Context
) -> None:
    from subspace.search.lexical import sql

    page = commands.create_page(cx, "Ferry timetable")
    node = commands.add_node(cx, page.id, "ferry schedule for the harbour")
    commands.add_node(cx, page.id, "ferry ferry")
    with database.pool.connection() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=50)  # fmt: skip
        for text in ("ferry schedule -harbour", "ferry", "timetable or schedule"):
            tsq = build_tsqueries(conn, parse_query(text), cx.actor.workspace_id)
            queries = [
                sql.ts_rank_cd_sql(scope, tsq, cap=10),
                sql.bm25_sql(scope, tsq, {"node": 4.0}, cap=10),
                sql.bm25_sql(scope, tsq, {"node": 4.0}, cap=10, items=[node.page_id]),
            ]
            for query in queries:
                named = set(re.findall(r"%\((\w+)\)s", query.sql))
                assert named == set(query.params), text
                conn.execute("explain " + query.sql, query.params)


def test_one_parameter_name_cannot_carry_two_values() -> None:
    from subspace.search.fragments import Fragment, bind

    same = bind(Fragment("%(a)s", {"a": 1}), Fragment("%(a)s + %(b)s", {"a": 1, "b": 2}))
    assert same == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="'a' bound to 1 and 2"):
        bind(Fragment("%(a)s", {"a": 1}), Fragment("%(a)s", {"a": 2}))


def test_a_paragraph_long_query_is_ranked_by_cover_density_of_its_rarest_words(
    database: Database, cx: Context
) -> None:
    from subspace.search.lexical import sql

    # Fillers every document holds, and two words one document holds: a pasted paragraph.
    fillers = [f"qu{a}{b}" for a in "bcdfghjk" for b in "lmnprstvz"][: sql.COVER_LEXEMES + 6]
    page = commands.create_page(cx, "")
    for _ in range(3):
        commands.add_node(cx, page.id, " ".join(fillers))
    target = commands.add_node(cx, page.id, "a quokka and a wombat " + " ".join(fillers[:4]))
    text = " ".join([*fillers, *fillers[:10], "quokka wombat"])
    with database.pool.connection() as conn:
        tsq = build_tsqueries(conn, parse_query(text), cx.actor.workspace_id)
        short = build_tsqueries(conn, parse_query("quokka wombat quokka"), cx.actor.workspace_id)
    ranked = sql.cover_words(tsq)
    assert ranked.count("|") == sql.COVER_LEXEMES - 1
    assert "'quokka'" in ranked and "'wombat'" in ranked
    # A word the query repeats is matched once; a short query is ranked by all of it.
    assert tsq.any_words.count("'qubl'") == 1
    assert sql.cover_words(short) == short.any_words == "( 'quokka' ) | ( 'wombat' )"
    # Every word still matches: the documents holding only fillers are found too.
    response = run(database, cx, text, mode="lexical", ranker="ts_rank_cd")
    assert set(ids(response)) >= {target.id} and len(response.rows) == 4
