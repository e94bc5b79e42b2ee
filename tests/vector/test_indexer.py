"""The embeddings indexer on a real database with the fake provider (counting, failing)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.indexer.chunking import Chunk, text_hash
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.queue import backlog, take_new, waiting
from subspace.indexer.status import indexer_status
from subspace.indexer.store import upsert_embeddings
from subspace.ingest.worker import extract_pending
from subspace.providers.base import checked_vectors
from subspace.providers.fake import FakeProvider
from tests.providers import BrokenVectorsProvider, CountingProvider, FailingProvider
from tests.samples import make_docx, make_pdf


def embeddings(database: Database, model: str = FakeProvider.model) -> dict[str, dict[str, Any]]:
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select ref, kind, kb_id, item_id, target_id, text_hash from search.embeddings "
            "where model = %s",
            (model,),
        ).fetchall()
    return {r["ref"]: r for r in rows}


def pending_events(database: Database) -> int:
    with database.pool.connection() as conn:
        return backlog(conn).events


def forget_the_queue(conn: Conn) -> None:
    """As if the follower had read every event and lost the work: queue empty, position at
    the head of the outbox."""
    conn.execute("delete from search.embedding_queue")
    conn.execute("update public.follower_positions set position = pg_current_snapshot()")


@pytest.fixture
def provider() -> CountingProvider:
    return CountingProvider()


@pytest.fixture
def indexer(
    database: Database, settings: Settings, provider: CountingProvider
) -> EmbeddingsFollower:
    return EmbeddingsFollower(database, settings, provider)


def test_pages_files_and_mail_are_embedded_under_their_refs(
    database: Database, settings: Settings, cx: Context, indexer: EmbeddingsFollower
) -> None:
    page = commands.create_page(cx, "Lisbon trip")
    tram = commands.add_node(cx, page.id, "Take tram 28 early")
    commands.add_node(cx, page.id, "   ")
    memo = commands.add_node(cx, page.id, "Passport expires in March", props={"memory": True})
    doc = commands.upload_file(cx, "plan.docx", make_docx(["Spring roadmap"] * 3))
    mail = commands.add_mail(cx, message_id="<m@x>", subject="Tickets", body_text="Two adults")
    extract_pending(database, settings)
    indexer.drain()
    stored = embeddings(database)
    assert set(stored) == {
        f"page:{page.id}",
        f"node:{tram.id}",
        f"node:{memo.id}",
        f"file:{doc.id}:0",
        f"mail:{mail.id}",
    }
    assert stored[f"node:{memo.id}"]["kind"] == "memory"
    assert stored[f"node:{tram.id}"]["item_id"] == page.id
    assert stored[f"node:{tram.id}"]["text_hash"] == text_hash("Take tram 28 early")
    assert stored[f"mail:{mail.id}"]["text_hash"] == text_hash("Tickets\nTwo adults")
    assert pending_events(database) == 0


def test_unchanged_text_costs_no_provider_call(
    cx: Context, indexer: EmbeddingsFollower, provider: CountingProvider, database: Database
) -> None:
    page = commands.create_page(cx, "Notes")
    node = commands.add_node(cx, page.id, "same text")
    indexer.drain()
    calls = len(provider.calls)
    commands.edit_node(cx, node.id, "same text")
    commands.rename_page(cx, page.id, "Notes")
    commands.set_memory(cx, node.id, True)  # kind changes, text does not
    indexer.drain()
    assert len(provider.calls) == calls
    assert embeddings(database)[f"node:{node.id}"]["kind"] == "memory"
    # The same text on a new bullet reuses the stored vector.
    commands.add_node(cx, page.id, "same text")
    indexer.drain()
    assert len(provider.calls) == calls


def test_deleted_and_emptied_items_are_pruned_and_come_back(
    database: Database, settings: Settings, cx: Context, indexer: EmbeddingsFollower
) -> None:
    page = commands.create_page(cx, "P")
    gone = commands.add_node(cx, page.id, "to delete")
    emptied = commands.add_node(cx, page.id, "to empty")
    file = commands.upload_file(cx, "a.txt", b"file words")
    mail = commands.add_mail(cx, message_id="<d@x>", subject="mail words")
    extract_pending(database, settings)
    indexer.drain()
    assert len(embeddings(database)) == 5
    commands.delete_node(cx, gone.id)
    commands.edit_node(cx, emptied.id, "")
    commands.delete_file(cx, file.id)
    commands.delete_mail(cx, mail.id)
    indexer.drain()
    assert set(embeddings(database)) == {f"page:{page.id}"}
    commands.delete_page(cx, page.id)
    indexer.drain()
    assert embeddings(database) == {}
    commands.restore_page(cx, page.id)
    commands.restore_file(cx, file.id)
    commands.restore_mail(cx, mail.id)
    indexer.drain()
    assert set(embeddings(database)) == {f"page:{page.id}", f"file:{file.id}:0", f"mail:{mail.id}"}


def test_a_changed_model_embeds_again_and_keeps_the_old_vectors_apart(
    database: Database, settings: Settings, cx: Context, indexer: EmbeddingsFollower
) -> None:
    page = commands.create_page(cx, "Model change")
    commands.add_node(cx, page.id, "a bullet")
    indexer.drain()
    newer = CountingProvider(model="fake-trigram-256-v2")
    keep = replace(settings, index_keep_other_models=True)  # tests/vector/test_model_change.py
    EmbeddingsFollower(database, keep, newer).sweep()
    assert newer.texts == ["Model change", "a bullet"]
    assert set(embeddings(database, "fake-trigram-256-v2")) == set(embeddings(database))
    with database.pool.connection() as conn:
        models = conn.execute("select distinct model from search.embeddings order by 1")
        assert [r["model"] for r in models] == ["fake-trigram-256", "fake-trigram-256-v2"]


def test_a_burst_of_edits_is_one_call_with_the_final_text(
    database: Database, settings: Settings, cx: Context, provider: CountingProvider
) -> None:
    indexer = EmbeddingsFollower(database, replace(settings, index_debounce_ms=400), provider)
    page = commands.create_page(cx, "Typing")
    node = commands.add_node(cx, page.id, "d")
    for i in range(50):
        commands.edit_node(cx, node.id, "draft " + "x" * i)
        assert indexer.run_once().outcome.embedded == 0
    time.sleep(0.5)
    indexer.run_once()
    assert provider.calls == [["Typing", "draft " + "x" * 49]]
    assert pending_events(database) == 0


def test_continuous_edits_are_flushed_after_the_maximum_wait(
    database: Database, settings: Settings, cx: Context, provider: CountingProvider
) -> None:
    slow = replace(settings, index_debounce_ms=300, index_max_wait_ms=400)
    indexer = EmbeddingsFollower(database, slow, provider)
    page = commands.create_page(cx, "Never still")
    node = commands.add_node(cx, page.id, "v0")
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < 1.2:
        i += 1
        commands.edit_node(cx, node.id, f"v{i}")
        indexer.run_once()
        time.sleep(0.05)
    assert len(provider.calls) >= 1  # flushed while edits never paused for 300 ms


def test_a_crash_inside_the_window_is_healed_by_the_sweep(
    database: Database, cx: Context, indexer: EmbeddingsFollower, provider: CountingProvider
) -> None:
    page = commands.create_page(cx, "Crashed")
    node = commands.add_node(cx, page.id, "lost edit")
    with database.pool.connection() as conn:  # the events were consumed, the work was not
        forget_the_queue(conn)
    assert indexer.drain().embedded == 0
    assert embeddings(database) == {}
    indexer.sweep()
    assert f"node:{node.id}" in embeddings(database)
    # Orphans are healed too: a row whose node vanished without an event.
    with database.pool.connection() as conn:
        conn.execute("delete from kb.nodes where id = %s", (node.id,))
        forget_the_queue(conn)
    indexer.sweep()
    assert set(embeddings(database)) == {f"page:{page.id}"}
    assert indexer.sweep().embedded == 0


def test_out_of_order_commits_lose_no_event(
    database: Database, cx: Context, indexer: EmbeddingsFollower
) -> None:
    # Different sources, so the two writers do not wait on the same statistics rows.
    first = database.pool.getconn()
    try:
        with first.transaction():
            early = commands.add_mail(cx.on(first), message_id="<early@x>", subject="Early id")
            late = commands.create_page(cx, "Late id, early commit")  # commits now
            indexer.drain()
            assert set(embeddings(database)) == {f"page:{late.id}"}
        indexer.drain()
    finally:
        database.pool.putconn(first)
    assert set(embeddings(database)) == {f"page:{late.id}", f"mail:{early.id}"}


def test_redelivery_is_idempotent(
    database: Database, cx: Context, indexer: EmbeddingsFollower, provider: CountingProvider
) -> None:
    page = commands.create_page(cx, "Twice")
    commands.add_node(cx, page.id, "delivered twice")
    indexer.drain()
    before, calls = embeddings(database), len(provider.calls)
    with database.pool.connection() as conn:  # every event read again, from the start
        conn.execute("update public.follower_positions set position = '1:1:'")
    indexer.drain()
    assert embeddings(database) == before
    assert len(provider.calls) == calls


def test_upsert_keeps_the_newest_text(database: Database, cx: Context) -> None:
    from datetime import UTC, datetime, timedelta

    page = commands.create_page(cx, "P")
    now = datetime.now(UTC)
    ws, model = cx.actor.workspace_id, "m"

    def chunk(text: str, at: datetime) -> Chunk:
        return Chunk(f"page:{page.id}", "page", page.kb_id, page.id, page.id, text, at)

    vectors = checked_vectors(
        FakeProvider().embed(["a", "b"]), count=2, model=model, dimensions=256
    )
    with database.pool.connection() as conn:
        # One batch naming the ref twice: the later entry wins.
        upsert_embeddings(conn, ws, model, [chunk("old", now), chunk("new", now)], vectors)
        # A slow writer with an older text does not overwrite it.
        upsert_embeddings(
            conn, ws, model, [chunk("stale", now - timedelta(seconds=5))], vectors[:1]
        )
        rows = conn.execute("select text_hash from search.embeddings").fetchall()
    assert [r["text_hash"] for r in rows] == [text_hash("new")]


def test_provider_failures_back_off_then_dead_letter_without_blocking_others(
    database: Database, settings: Settings, cx: Context
) -> None:
    provider = FailingProvider(lambda text: "POISON" in text)
    indexer = EmbeddingsFollower(database, replace(settings, index_max_attempts=3), provider)
    bad = commands.create_page(cx, "POISON page")
    good = commands.create_page(cx, "Healthy page")
    indexer.run_once()
    assert f"page:{good.id}" in embeddings(database)
    with database.pool.connection() as conn:
        row = conn.execute(
            "select attempts, last_error, retry_at > now() as later from search.embedding_queue "
            "where item_id = %s",
            (bad.id,),
        ).fetchone()
    assert row == {"attempts": 1, "last_error": "provider is down", "later": True}
    assert indexer.run_once().due == 0  # not retried before its time
    for _ in range(2):
        with database.pool.connection() as conn:
            conn.execute("update search.embedding_queue set retry_at = now()")
        indexer.run_once()
    with database.pool.connection() as conn:
        dead = conn.execute(
            "select item_kind, item_id, error, attempts from search.dead_letters"
        ).fetchall()
        status = indexer_status(conn, "fake", FakeProvider.model)
    assert dead == [
        {"item_kind": "page", "item_id": bad.id, "error": "provider is down", "attempts": 3}
    ]
    assert (status.backlog, status.dead_letters) == (0, 1)
    # Writes after it keep flowing.
    later = commands.create_page(cx, "After the poison")
    indexer.run_once()
    assert f"page:{later.id}" in embeddings(database)


@pytest.mark.parametrize(
    "broken",
    [
        BrokenVectorsProvider(width=768),
        BrokenVectorsProvider(width=3072),
        BrokenVectorsProvider(nan=True),
    ],
    ids=["768", "3072", "nan"],
)
def test_malformed_vectors_are_never_stored(
    database: Database, settings: Settings, cx: Context, broken: BrokenVectorsProvider
) -> None:
    indexer = EmbeddingsFollower(database, replace(settings, index_max_attempts=1), broken)
    commands.create_page(cx, "Vectors")
    indexer.run_once()
    assert embeddings(database) == {}
    with database.pool.connection() as conn:
        dead = conn.execute("select error from search.dead_letters").fetchone()
    assert dead is not None
    assert "model" in dead["error"]


def test_status_and_waiting_count(
    database: Database, cx: Context, indexer: EmbeddingsFollower
) -> None:
    page = commands.create_page(cx, "Waiting")
    for i in range(3):
        commands.add_node(cx, page.id, f"n{i}")
    commands.add_mail(cx, message_id="<w@x>", subject="s")
    commands.create_tag(cx, "t", "text")
    with database.pool.connection() as conn:
        assert waiting(conn, cx.actor.workspace_id) == 2
        status = indexer_status(conn, "fake", FakeProvider.model)
    assert status.backlog == 5  # the tag's event is about no item: it waits for nothing
    assert status.waiting_items == 2
    assert status.lag_seconds >= 0
    indexer.drain()
    with database.pool.connection() as conn:
        assert waiting(conn, cx.actor.workspace_id) == 0
        assert indexer_status(conn, "fake", FakeProvider.model).embeddings == 5


def test_the_running_indexer_wakes_on_notify(
    database: Database, settings: Settings, cx: Context
) -> None:
    indexer = EmbeddingsFollower(database, settings, FakeProvider())
    indexer.poll_s = 60.0  # only a notification can wake it
    thread = threading.Thread(target=indexer.run, daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # let it finish its first round and listen
        page = commands.create_page(cx, "Notified")
        deadline = time.monotonic() + 10
        while f"page:{page.id}" not in embeddings(database):
            assert time.monotonic() < deadline, "the indexer did not wake up"
            time.sleep(0.05)
    finally:
        indexer.stop()
        thread.join(5)


def test_file_chunks_are_written_with_the_text(
    database: Database, settings: Settings, cx: Context
) -> None:
    long_pages = [
        "\n".join(f"Line {p}-{i} about trams and ferries." for i in range(40)) for p in range(3)
    ]
    file = commands.upload_file(cx, "long.pdf", make_pdf(long_pages))
    extract_pending(database, settings)
    with database.pool.connection() as conn:
        chunks = conn.execute(
            "select n, length(text) as size, text_tsv @@ to_tsquery('english', 'ferry') as hit "
            "from search.file_chunks where file_id = %s order by n",
            (file.id,),
        ).fetchall()
    assert len(chunks) >= 3
    assert [c["n"] for c in chunks] == list(range(len(chunks)))
    assert all(c["hit"] and c["size"] <= 1500 for c in chunks)


def test_followers_taking_at_once_queue_every_item_once(database: Database, cx: Context) -> None:
    """Two processes' followers take the outbox's new events while pages are written: every
    page ends up queued exactly once, with every event of it counted, and none is lost when
    one follower's transaction fails to serialise against the other's."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def take() -> None:
        try:
            while not stop.is_set():
                with database.pool.connection() as conn:
                    take_new(conn)
        except BaseException as exc:  # every failure is the finding
            failures.append(exc)

    takers = [threading.Thread(target=take) for _ in range(2)]
    for taker in takers:
        taker.start()
    pages = [commands.create_page(cx, f"Written while taken {n}") for n in range(30)]
    for page in pages[:10]:
        commands.rename_page(cx, page.id, f"{page.title}, renamed")
    stop.set()
    for taker in takers:
        taker.join(30)
    with database.pool.connection() as conn:
        take_new(conn)  # what came after the takers' last round
        queued = conn.execute(
            "select item_id, events from search.embedding_queue where item_kind = 'page'"
        ).fetchall()
    assert failures == []
    assert {row["item_id"]: row["events"] for row in queued} == {
        page.id: 2 if n < 10 else 1 for n, page in enumerate(pages)
    }
