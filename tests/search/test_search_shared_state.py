"""The state searches share lives on a SearchRuntime, one per Database: never on a module."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.api import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database, open_database
from subspace.keys import create_key
from subspace.providers.base import EmbedResult
from subspace.providers.fake import FakeProvider
from subspace.search import vector
from subspace.search.request import SearchRequest, SearchResponse
from subspace.search.searcher import Searcher
from subspace.search.service import search
from subspace.search.shared import SearchRuntime
from tests.search_helpers import ids, index, run


def test_two_runtimes_do_not_share_the_base_sizes_they_remember(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subspace.ingest.outline import OutlineItem

    monkeypatch.setattr(vector, "EXACT_SCAN_ROWS", 5)
    page = commands.create_page(cx, "")
    kept = commands.add_node(cx, page.id, "basalt column")
    # More than the leg's window, so the walk fills it and the base stays remembered as large.
    bulk = commands.create_page_from_outline(
        cx, "", [OutlineItem(f"basalt shelf {i}") for i in range(120)]
    )
    index(database, cx)
    assert run(database, cx, "basalt", mode="vector").legs["vector"].plan == "index"
    commands.delete_page(cx, bulk.id)
    index(database, cx)
    other = Searcher(SearchRuntime(), FakeProvider())
    try:
        # A runtime of its own counts the base, now small, and scans it exactly ...
        fresh = search(cx, other, SearchRequest(query="basalt", mode="vector"))
        assert fresh.legs["vector"].plan == "exact"
        assert ids(fresh) == [kept.id]
        # ... while the first still trusts what it remembered, and walks the index.
        remembered = run(database, cx, "basalt", mode="vector")
        assert remembered.legs["vector"].plan == "index"
        assert ids(remembered) == [kept.id]
    finally:
        other.runtime.close()


def test_every_searcher_of_a_database_shares_its_runtime(database: Database) -> None:
    searcher = database.searcher(FakeProvider())
    assert searcher.runtime is database.search_runtime
    assert searcher.for_answers().runtime is database.search_runtime
    assert searcher.observed_by(lambda response: None).runtime is database.search_runtime
    assert database.searcher(None).runtime is database.search_runtime


def test_a_searcher_reports_each_search_to_its_observer_and_nothing_to_others(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "")
    commands.add_node(cx, page.id, "granite from the quarry")
    index(database, cx)
    heard: list[SearchResponse] = []
    plain = database.searcher(FakeProvider())
    observed = plain.observed_by(heard.append)
    first = search(cx, observed, SearchRequest(query="granite"))
    search(cx, plain, SearchRequest(query="granite"))
    second = search(cx, observed, SearchRequest(query="quarry", mode="lexical"))
    assert heard == [first, second]


def test_the_embedding_threads_stop_with_the_app_that_opened_the_database(
    settings: Settings, database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Harbour")
    commands.add_node(cx, page.id, "the breakwater shelters the harbour")
    index(database, cx)
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "test")
    app = create_app(settings)  # opens, and on shutdown closes, a database of its own
    with TestClient(app) as client:
        client.headers["authorization"] = f"Bearer {token}"
        found = client.post("/api/search", json={"query": "breakwater"})
        assert found.status_code == 200, found.text
        assert found.json()["legs"]["vector"]["ran"] is True
        runtime = app.state.database.search_runtime
        assert runtime is not database.search_runtime
    with pytest.raises(RuntimeError, match="shutdown"):
        runtime.embed_threads.submit(print)
    runtime.close()  # safe to call twice


class CountingProvider(FakeProvider):
    """The fake provider, counting its calls and remembering the threads they ran on."""

    def __init__(self) -> None:
        self.calls = 0
        self.threads: list[threading.Thread] = []

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        self.calls += 1
        self.threads.append(threading.current_thread())
        return super().embed(texts)


def test_a_query_embedded_once_is_reused_by_the_next_search(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "")
    node = commands.add_node(cx, page.id, "granite from the quarry")
    index(database, cx)
    provider = CountingProvider()
    first = run(database, cx, "granite quarry", provider)
    second = run(database, cx, "granite quarry", provider)
    assert ids(first) == ids(second) == [node.id]
    assert second.legs["vector"].ran
    assert provider.calls == 1


def test_two_runtimes_do_not_share_the_query_embeddings_they_keep(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "")
    commands.add_node(cx, page.id, "granite from the quarry")
    index(database, cx)
    provider = CountingProvider()
    other = Searcher(SearchRuntime(), provider)
    try:
        run(database, cx, "granite", provider)
        search(cx, other, SearchRequest(query="granite"))  # embeds again: its cache is its own
        assert provider.calls == 2
        search(cx, other, SearchRequest(query="granite"))
        run(database, cx, "granite", provider)
        assert provider.calls == 2
    finally:
        other.runtime.close()


def test_the_query_embedding_threads_stop_when_the_database_closes(
    settings: Settings, database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "")
    node = commands.add_node(cx, page.id, "granite from the quarry")
    index(database, cx)
    provider = CountingProvider()
    opened = open_database(settings, pool_size=2)
    try:
        found = run(opened, opened.context(cx.actor, cx.settings), "granite", provider)
        assert ids(found) == [node.id]
        assert provider.calls == 1
        (thread,) = provider.threads
        assert thread.name.startswith("query-embed")
        assert thread.is_alive()
    finally:
        opened.close()
    assert not thread.is_alive()
    with pytest.raises(RuntimeError, match="shutdown"):
        opened.search_runtime.embed_threads.submit(print)
