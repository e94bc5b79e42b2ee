"""`subspace reindex` and `subspace indexer status`, through the CLI on a real database."""

from __future__ import annotations

import json
import re
import time

import psycopg
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.locks import SERVER_LOCK_KEY
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.reindex import reembed
from subspace.indexer.status import indexer_status
from subspace.ingest.importer import Importer
from subspace.ingest.worker import extract_pending
from subspace.providers.fake import FakeProvider
from tests.samples import make_docx, make_email, make_pdf


def snapshot(database: Database) -> list[tuple[str, str, str]]:
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select ref, kind, text_hash from search.embeddings order by ref"
        ).fetchall()
    return [(r["ref"], r["kind"], r["text_hash"]) for r in rows]


def vector_index(database: Database) -> str:
    """The fake model's HNSW index, as pg_indexes shows it ('' when there is none)."""
    with database.pool.connection() as conn:
        row = conn.execute(
            "select indexdef from pg_indexes where indexname = search.vector_index_name(%s)",
            (FakeProvider.model,),
        ).fetchone()
    return "" if row is None else str(row["indexdef"])


@pytest.fixture
def workspace(database: Database, settings: Settings, cx: Context) -> None:
    page = commands.create_page(cx, "Reindex me")
    commands.add_node(cx, page.id, "a bullet about ferries")
    commands.add_node(cx, page.id, "a memory", props={"memory": True})
    commands.upload_file(cx, "guide.pdf", make_pdf(["The ferry leaves at nine"]))
    commands.upload_file(cx, "plan.docx", make_docx(["Spring roadmap"]))
    with cx.transaction() as conn:
        kb = conn.execute("select id from kb.knowledge_bases").fetchone()
    assert kb is not None
    Importer(cx, kb["id"]).add_message(make_email("Ferry times", "Nine and noon"), "m.eml")
    extract_pending(database, settings)
    EmbeddingsFollower(database, settings, FakeProvider()).drain()


def test_reindex_rebuilds_the_same_refs_and_reuses_vectors(
    runner: CliRunner, database: Database, workspace: None
) -> None:
    before = snapshot(database)
    assert {kind for _, kind, _ in before} == {"page", "node", "memory", "file", "mail"}
    index_before = vector_index(database)
    with database.pool.connection() as conn:
        conn.execute("delete from search.file_chunks")  # reindex re-extracts them
    result = runner.invoke(main, ["reindex"])
    assert result.exit_code == 0, result.output
    assert "Re-extracted 2 files (0 failed)" in result.stdout
    assert f"0 texts sent to the provider, {len(before)} reused" in result.stdout
    # Not on a terminal: each task says where it ended, with its rate, as lines.
    assert re.search(r"^Embedding: 4 of 4 \(100 %\)(, [\d.,]+/s)?, done in", result.stderr, re.M)
    assert re.search(r"^Building the lexical index: (\d+) of \1 \(100 %\)", result.stderr, re.M)
    assert snapshot(database) == before
    # The vector index was dropped for the bulk load and built again, the same as before.
    assert vector_index(database) == index_before
    assert "hnsw" in index_before


def test_reindex_of_one_knowledge_base(
    runner: CliRunner, database: Database, cx: Context, workspace: None
) -> None:
    other = commands.create_knowledge_base(cx, "Other")
    page = commands.create_page(cx, "Elsewhere", kb_id=other.id)
    result = runner.invoke(main, ["reindex", "--kb", "Other"])
    assert result.exit_code == 0, result.output
    assert "Re-embedded 1 items" in result.stdout
    assert "1 texts sent" in result.stdout
    assert (f"page:{page.id}", "page") in [(r, k) for r, k, _ in snapshot(database)]
    missing = runner.invoke(main, ["reindex", "--kb", "Nope"])
    assert missing.exit_code == 1
    assert "No knowledge base named 'Nope'" in missing.output


def test_reindex_refuses_while_a_server_holds_the_database(
    runner: CliRunner, database: Database
) -> None:
    with psycopg.connect(database.dsn, autocommit=True) as server:
        server.execute("select pg_advisory_lock_shared(%s)", (SERVER_LOCK_KEY,))
        result = runner.invoke(main, ["reindex"])
    assert result.exit_code == 1
    assert "A Subspace server is running on this database" in result.output


def test_indexer_status_json(runner: CliRunner, cx: Context) -> None:
    page = commands.create_page(cx, "Waiting")
    commands.add_node(cx, page.id, "one")
    result = runner.invoke(main, ["indexer", "status", "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["backlog"] == 2
    assert status["waiting_items"] == 1
    assert status["model"] == "fake-trigram-256"
    assert status["dead_letters"] == 0
    table = runner.invoke(main, ["indexer", "status"])
    assert "backlog" in table.stdout


def test_the_app_runs_the_indexer_and_holds_the_server_lock(
    client: TestClient, database: Database
) -> None:
    with TestClient(client.app, headers=dict(client.headers)) as live:
        page = live.post("/api/pages", json={"title": "Served"}).json()
        deadline = time.monotonic() + 10
        while not any(ref == f"page:{page['id']}" for ref, _, _ in snapshot(database)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with database.pool.connection() as conn:
            row = conn.execute("select pg_try_advisory_lock(%s) as free", (SERVER_LOCK_KEY,))
            assert row.fetchone() == {"free": False}


def backlog(database: Database) -> dict[str, int]:
    """What `subspace indexer status` counts as waiting: events and the items they are about."""
    with database.pool.connection() as conn:
        status = indexer_status(conn, "fake", FakeProvider().model)
    return {"backlog": status.backlog, "waiting_items": status.waiting_items}


def test_reindex_acknowledges_the_events_it_covered(
    runner: CliRunner, database: Database, cx: Context, workspace: None
) -> None:
    other = commands.create_knowledge_base(cx, "Other")
    here = commands.create_page(cx, "Written while no server ran")
    commands.add_node(cx, here.id, "a bullet about tides")
    there = commands.create_page(cx, "Elsewhere", kb_id=other.id)
    commands.add_node(cx, there.id, "a bullet about harbours")
    # The knowledge base's own event is about no item: it waits for no embedding.
    assert backlog(database) == {"backlog": 4, "waiting_items": 2}

    # One knowledge base: its items' events are covered; the other's stay waiting.
    result = runner.invoke(main, ["reindex", "--kb", "Other"])
    assert result.exit_code == 0, result.output
    assert backlog(database) == {"backlog": 2, "waiting_items": 1}

    result = runner.invoke(main, ["reindex"])
    assert result.exit_code == 0, result.output
    status = runner.invoke(main, ["indexer", "status", "--json"])
    assert json.loads(status.stdout)["backlog"] == 0
    assert json.loads(status.stdout)["waiting_items"] == 0
    refs = {ref for ref, _, _ in snapshot(database)}
    assert {f"page:{here.id}", f"page:{there.id}"} <= refs


def test_events_written_during_a_reindex_stay_for_the_indexer(
    database: Database, settings: Settings, cx: Context, workspace: None
) -> None:
    page = commands.create_page(cx, "Before the reindex")
    written: list[str] = []

    def write_once(_: int) -> None:
        if not written:
            written.append(commands.add_node(cx, page.id, "written during the reindex").text)

    reembed(database, settings, FakeProvider(), None, progress=write_once)
    assert written
    assert backlog(database) == {"backlog": 1, "waiting_items": 1}
    EmbeddingsFollower(database, settings, FakeProvider()).drain()
    assert backlog(database) == {"backlog": 0, "waiting_items": 0}
