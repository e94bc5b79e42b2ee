"""search()'s steps, each on a real database: what explaining a target is told by the other
steps (the pages served before, the legs that ran), and the cursor step on its own."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.search import service, vector
from subspace.search.cursors import fingerprint, seal, workspace_secret
from subspace.search.filters import TagFilter, resolve_scope
from subspace.search.fragments import Fragment
from subspace.search.fusion import Fused, Hit
from subspace.search.grouping import group_by_page
from subspace.search.legs import SEARCH_SETTINGS, STATEMENT_TIMEOUT_MS
from subspace.search.lexical import leg as lexical_leg
from subspace.search.lexical.terms import build_tsqueries
from subspace.search.query import parse_query
from subspace.search.request import SearchRequest
from tests.search_helpers import embed, follow, ids, index, run


def test_explain_names_a_target_an_earlier_page_served(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Paged")
    for text in ("narwhal one", "narwhal two", "narwhal three"):
        commands.add_node(cx, page.id, text)
    index(database, cx)
    first = run(database, cx, "narwhal", mode="lexical", limit=1)
    assert first.next_cursor is not None
    served = first.rows[0].id
    second = run(
        database,
        cx,
        "narwhal",
        mode="lexical",
        limit=1,
        cursor=first.next_cursor,
        explain_target=f"node:{served}",
    )
    assert served not in ids(second)
    assert second.absent == {
        "target": f"node:{served}",
        "shown": False,
        "reasons": ["served on an earlier page"],
    }


def test_explain_names_each_leg_and_a_target_not_embedded_yet(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Legs")
    commands.add_node(cx, page.id, "a beluga surfaced")
    commands.add_node(cx, page.id, "beluga pod")
    index(database, cx)
    # Written after the indexer ran, and longer, so BM25 ranks it below the others.
    late = commands.add_node(cx, page.id, "the beluga sang of cold grey northern water")
    response = run(database, cx, "beluga", limit=1, explain_target=f"node:{late.id}")
    assert response.absent is not None
    assert not response.absent["shown"]
    reasons = response.absent["reasons"]
    assert any(r.startswith("lexical leg: rank") for r in reasons)
    assert "vector leg: not embedded yet (the indexer has not reached it)" in reasons
    assert any(r.startswith("cut by the limit: fused position") for r in reasons)


def test_the_cursor_fingerprint_is_unchanged_so_issued_cursors_still_decode() -> None:
    # Values the fingerprint had when these cursors were first issued: a change here would
    # refuse every cursor a user holds ("belongs to another query").
    assert fingerprint(SearchRequest(query="lantern", limit=5)) == "336747c7407640e9"
    every_option = SearchRequest(
        query="lantern -ember",
        limit=7,  # not part of it: pages may differ in size
        kb_ids=[UUID(int=2), UUID(int=1)],
        kinds=["node", "file"],
        tags=[TagFilter("status", "eq", "open")],
        mode="lexical",
        weights={"lexical": 1.0},
        ranker="bm25",
        typos=False,
        group_by_page=True,
    )
    assert fingerprint(every_option) == "d2841c4efacaa42d"


def test_a_cursor_in_the_issued_format_pages_on(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Pond")
    for text in ("otter one", "otter two", "otter three"):
        commands.add_node(cx, page.id, text)
    index(database, cx)
    first = run(database, cx, "otter", mode="lexical", limit=1)
    with cx.transaction() as conn:
        secret = workspace_secret(conn, cx.actor.workspace_id)
    served = f"n{first.rows[0].id.hex}"
    cursor = seal(secret, {"v": 2, "q": "8972d5a070aa8a86", "s": [served]})
    second = run(database, cx, "otter", mode="lexical", limit=2, cursor=cursor)
    assert len(second.rows) == 2
    assert first.rows[0].id not in ids(second)
    assert second.next_cursor is None  # three rows, all served


def test_only_grouped_rows_count_the_other_matches_on_their_page(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Tides")
    commands.add_node(cx, page.id, "heron one")
    commands.add_node(cx, page.id, "heron two")
    index(database, cx)
    flat = run(database, cx, "heron", mode="lexical")
    assert [row.more_on_page for row in flat.rows] == [None, None]
    grouped = run(database, cx, "heron", mode="lexical", group_by_page=True)
    assert [row.more_on_page for row in grouped.rows] == [1]


def test_a_hybrid_search_holds_one_connection(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Reef")
    commands.add_node(cx, page.id, "a grouper under the reef")
    index(database, cx)
    run(database, cx, "grouper")
    database.pool.pop_stats()
    hybrid = run(database, cx, "grouper")
    assert database.pool.pop_stats().get("requests_num", 0) == 1
    assert hybrid.legs["vector"].ran
    assert hybrid.legs["lexical"].ran
    assert hybrid.rows


def failing(sql: Fragment) -> Fragment:
    """The statement `sql` made to fail on the server, as a bug or a timeout would."""
    return Fragment(f"select * from ({sql.sql}) q where 1 / (random() * 0)::int = 1", sql.params)


def too_slow(sql: Fragment) -> Fragment:
    """The statement `sql` made to outlast the search's time limit (lowered to 100 ms)."""
    return Fragment(f"select * from ({sql.sql}) q where pg_sleep(0.3) is not null", sql.params)


@pytest.mark.parametrize(
    ("breaking", "error"), [(failing, "DivisionByZero"), (too_slow, "QueryCanceled")]
)
def test_a_failing_lexical_leg_leaves_the_vector_leg_to_answer(
    database: Database,
    cx: Context,
    monkeypatch: pytest.MonkeyPatch,
    breaking: Callable[[Fragment], Fragment],
    error: str,
) -> None:
    page = commands.create_page(cx, "Reef")
    node = commands.add_node(cx, page.id, "a grouper under the reef")
    embed(database, cx)  # no lexical index yet: the leg ranks every row in Postgres
    real = lexical_leg.bm25_sql
    monkeypatch.setattr(lexical_leg, "bm25_sql", lambda *a, **k: breaking(real(*a, **k)))
    monkeypatch.setattr(
        service, "SEARCH_SETTINGS", SEARCH_SETTINGS.replace(f"{STATEMENT_TIMEOUT_MS}ms", "100ms")
    )
    # Again and again on the pool's connections: psycopg prepares a statement on its fifth
    # run, and a failure must not leave a connection whose next searches fail.
    for _ in range(12):
        response = run(database, cx, "grouper", weights={"lexical": 1.0, "vector": 1.0})
        assert response.degraded == [f"lexical: failed ({error})"]
        assert response.legs["vector"].ran
        assert node.id in ids(response)
        assert response.rows[0].title == "Reef"  # hydrated after the failure, same transaction
    monkeypatch.setattr(lexical_leg, "bm25_sql", real)
    follow(database, cx)
    assert not run(database, cx, "grouper").degraded


def test_a_failing_vector_leg_leaves_the_lexical_leg_to_answer(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = commands.create_page(cx, "Reef")
    node = commands.add_node(cx, page.id, "a grouper under the reef")
    index(database, cx)
    real = vector._exact_sql
    monkeypatch.setattr(vector, "_exact_sql", lambda *a, **k: failing(real(*a, **k)))
    response = run(database, cx, "grouper")
    assert response.degraded == ["vector: failed (DivisionByZero)"]
    assert response.legs["lexical"].ran
    assert ids(response) == [node.id]


def test_grouping_counts_the_matches_on_a_page_beyond_the_legs_lists(cx: Context) -> None:
    # One candidate stands for its page: the title, the other bullet and the memory that match
    # are counted from the tables the page's kinds declare, whatever the legs drew.
    page = commands.create_page(cx, "Heron notes")
    shown = commands.add_node(cx, page.id, "a heron at dawn")
    commands.add_node(cx, page.id, "the heron left")
    commands.add_node(cx, page.id, "heron nests are big", props={"memory": True})
    commands.add_node(cx, page.id, "nothing here")
    with cx.transaction() as conn:
        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=10)  # fmt: skip
        tsq = build_tsqueries(conn, parse_query("heron"), cx.actor.workspace_id)
        hit = Hit(("node", shown.id), "node", f"node:{shown.id}", page.kb_id, page.id, 1.0)
        candidate = Fused(hit.target, 1.0, {"lexical": (1, hit)})
        kept = group_by_page(conn, scope, [candidate], tsq)
    assert kept == [candidate]
    assert candidate.more_on_page == 3
