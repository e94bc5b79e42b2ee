"""A change of model heals itself while the server serves, and the embedding queue shares
its work fairly: newest and smallest items first, one workspace's bulk import never holding
back another's new bullet."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.indexer import embeddings
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.status import embedding_progress, indexer_status
from subspace.providers.fake import FakeProvider
from subspace.workspaces import create_workspace
from tests.providers import CountingProvider
from tests.search_helpers import index, run

NEW_MODEL = "fake-trigram-256-v2"


def models(database: Database) -> dict[str, int]:
    with database.pool.connection() as conn:
        rows = conn.execute("select model, count(*) as n from search.embeddings group by model")
        return {r["model"]: r["n"] for r in rows}


def populate(cx: Context, pages: int, bullets: int) -> list[str]:
    """`pages` pages of `bullets` bullets each, the last written last; their titles."""
    titles = []
    for p in range(pages):
        page = commands.create_page(cx, f"Ledger notes {p}")
        for b in range(bullets):
            commands.add_node(cx, page.id, f"posting rule {p}.{b} for the ledger")
        titles.append(page.title)
    return titles


def test_a_new_model_re_embeds_in_the_background_and_search_says_so_until_done(
    database: Database, settings: Settings, cx: Context
) -> None:
    populate(cx, pages=6, bullets=5)
    index(database, cx)  # every text has a vector of the old model
    newer, searching = CountingProvider(model=NEW_MODEL), CountingProvider(model=NEW_MODEL)
    follower = EmbeddingsFollower(database, replace(settings, embed_batch=4), newer)

    # The server starts with the new model: nothing is embedded with it yet, search says so.
    follower.heal()
    response = run(database, cx, "ledger posting", provider=searching, mode="hybrid")
    assert response.pending_embeddings == 6
    assert any("6 items are not embedded with fake-trigram-256-v2 yet" in n for n in response.notes)
    assert response.rows  # the words still find everything
    with database.pool.connection() as conn:
        status = indexer_status(conn, "fake", NEW_MODEL)
    assert (status.healing, status.wanted, status.embeddings) == (6, 36, 0)
    assert status.progress.startswith("0 of 36 texts embedded with fake-trigram-256-v2 (0%)")

    # Its loop does the rest, a transaction of at most embed_batch texts at a time.
    thread = threading.Thread(target=follower.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while models(database).get(FakeProvider.model) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        follower.stop()
        thread.join(10)
    assert max(len(call) for call in newer.calls) <= 4
    assert sorted(newer.texts) == sorted(set(newer.texts)) and len(newer.texts) == 36
    assert models(database) == {NEW_MODEL: 36}  # the old model's vectors went once complete
    with database.pool.connection() as conn:
        done = indexer_status(conn, "fake", NEW_MODEL)
        assert embedding_progress(conn, NEW_MODEL, cx.actor.workspace_id).line == ""
    assert (done.healing, done.embeddings, done.progress) == (0, 36, "")
    assert done.rate_per_s > 0  # 36 texts in the last minute
    response = run(database, cx, "ledger posting", provider=searching, mode="hybrid")
    assert response.pending_embeddings == 0
    assert not any("not embedded" in n for n in response.notes)


def test_the_heal_serves_small_and_recent_items_first(
    database: Database, settings: Settings, cx: Context
) -> None:
    big = commands.create_page(cx, "Changelog")
    for i in range(70):  # over SMALL_ITEM_TEXTS: healed after the small ones
        commands.add_node(cx, big.id, f"release {i}")
    commands.create_page(cx, "Older note")
    commands.create_page(cx, "Newer note")
    index(database, cx)
    provider = CountingProvider(model=NEW_MODEL)
    follower = EmbeddingsFollower(database, replace(settings, embed_batch=1), provider)
    follower.heal()
    for _ in range(3):
        follower.run_once()
    assert provider.texts == ["Newer note", "Older note", "Changelog"]
    follower.drain()
    assert len(provider.texts) == 73


def test_a_kept_model_stays_beside_the_new_one(
    database: Database, settings: Settings, cx: Context
) -> None:
    populate(cx, pages=2, bullets=1)
    index(database, cx)
    keep = replace(settings, index_keep_other_models=True)
    EmbeddingsFollower(database, keep, CountingProvider(model=NEW_MODEL)).sweep()
    assert models(database) == {FakeProvider.model: 4, NEW_MODEL: 4}
    EmbeddingsFollower(database, settings, CountingProvider(model=NEW_MODEL)).sweep()
    assert models(database) == {NEW_MODEL: 4}


def test_one_workspaces_bulk_import_does_not_hold_back_anothers_new_bullet(
    database: Database, settings: Settings, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embeddings, "FETCH_LIMIT", 10)  # a round sees 10 of the 41 items
    populate(cx, pages=40, bullets=3)  # the bulk import, queued first
    with database.pool.connection() as conn:
        stranger = create_workspace(conn, "Stranger")
    theirs = database.context(stranger, settings)
    page = commands.create_page(theirs, "Standup")
    commands.add_node(theirs, page.id, "ship the fix today")
    provider = CountingProvider()
    follower = EmbeddingsFollower(database, replace(settings, embed_batch=8), provider)

    first = follower.run_once()
    assert "ship the fix today" in provider.texts
    assert len(provider.texts) <= 8 + 2  # one transaction each: the bulk's, then theirs
    assert first.more and first.next_due_s == 0  # the bulk goes on at once
    follower.drain()
    assert len(provider.texts) == 40 * 4 + 2


def test_a_page_bigger_than_a_transaction_is_embedded_across_rounds(
    database: Database, settings: Settings, cx: Context
) -> None:
    page = commands.create_page(cx, "Big page")
    for i in range(50):
        commands.add_node(cx, page.id, f"line {i}")
    provider = CountingProvider()
    follower = EmbeddingsFollower(database, replace(settings, embed_batch=16), provider)
    first = follower.run_once()
    assert (first.outcome.embedded, first.done, first.more) == (16, 0, True)
    with database.pool.connection() as conn:
        assert embedding_progress(conn, FakeProvider.model).embedded == 16
    follower.drain()
    assert len(provider.texts) == 51  # nothing embedded twice
    with database.pool.connection() as conn:
        assert conn.execute("select count(*) as n from search.embedding_queue").fetchone() == {
            "n": 0
        }
