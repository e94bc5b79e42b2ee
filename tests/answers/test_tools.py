"""The agent tools (search, grep, read, node.read), EXPLAIN plans, and the search API and CLI."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from uuid import uuid4

import psycopg
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.agents.tools import TOOLS, kb_search
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput, NotFound
from subspace.ingest.outline import OutlineItem
from subspace.ingest.worker import extract_pending
from subspace.providers.fake import FakeProvider
from subspace.search import registry
from subspace.search.filters import resolve_scope
from subspace.search.fragments import Fragment
from subspace.search.grep import grep
from subspace.search.lexical.sql import bm25_sql, ts_rank_cd_sql
from subspace.search.lexical.terms import build_tsqueries
from subspace.search.query import parse_query
from subspace.search.reading import kb_node_read, kb_read
from tests.search_helpers import index, run


def test_kb_search_renders_hits_with_refs(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Runbook")
    step = commands.add_node(cx, page.id, "Drain the node before the upgrade")
    index(database, cx)
    text = kb_search(cx, database.searcher(FakeProvider()), "drain upgrade", kinds=["node"])
    assert text.splitlines()[0] == (
        f"1. [node] Runbook — Drain the node before the upgrade (node:{step.id})"
    )
    nothing = kb_search(cx, database.searcher(FakeProvider()), "zzzqqq", kinds=["mail"])
    assert nothing.startswith(
        "No matches for “zzzqqq”: “zzzqqq” is like no word here, so no spelling was corrected, "
        "and no item holds its words"
    )


def test_kb_read_and_node_read(cx: Context) -> None:
    page = commands.create_page(cx, "Trip")
    day = commands.add_node(cx, page.id, "Day one")
    tram = commands.add_node(cx, page.id, "Tram 28", parent_id=day.id)
    commands.add_node(cx, page.id, "Keep the receipt", parent_id=tram.id, props={"memory": True})
    commands.add_node(cx, page.id, "Day two")
    outline = kb_read(cx, page.id)
    assert outline.splitlines() == [
        f"# Trip (page:{page.id})",
        f"- Day one (node:{day.id})",
        f"  - Tram 28 (node:{tram.id})",
        f"    - Keep the receipt [memory] (node:{outline.split('(node:')[3][:36]})",
        f"- Day two (node:{outline.split('(node:')[4][:36]})",
    ]
    subtree = kb_node_read(cx, tram.id).splitlines()
    assert subtree[1:] == [outline.splitlines()[2].strip(), "  " + outline.splitlines()[3].strip()]
    commands.archive_page(cx, page.id)
    with pytest.raises(NotFound):
        kb_read(cx, page.id)
    with pytest.raises(NotFound):
        kb_node_read(cx, tram.id)


def test_tools_declare_that_reads_need_no_approval() -> None:
    assert {t.name: t.needs_approval for t in TOOLS} == {
        "kb.search": False, "kb.grep": False, "kb.read": False, "kb.node.read": False,
    }  # fmt: skip


def test_grep_finds_every_occurrence_everywhere(database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Codes")
    for i in range(7):
        commands.add_node(cx, page.id, f"entry {i}: ERR-42 seen, err-42 again" if i % 2 else
                          f"entry {i}")  # fmt: skip
    commands.upload_file(cx, "log.txt", b"boot ok\nERR-42 at 10:00\n")
    commands.add_mail(cx, message_id="<e@x>", subject="ERR-42 report", body_text="see ERR-42")
    extract_pending(database, cx.settings)
    result = grep(cx, "err-42")
    kinds = [m.ref.split(":")[0] for m in result.matches]
    assert kinds == ["node"] * 3 + ["file", "mail"]
    assert [m.count for m in result.matches] == [2, 2, 2, 1, 2]
    assert all("ERR-42" in m.snippet or "err-42" in m.snippet for m in result.matches)
    assert not result.timed_out
    assert result.next_cursor is None
    # Paged: two at a time, in the same order, nothing twice.
    pages, cursor = [], None
    while True:
        part = grep(cx, "err-42", limit=2, cursor=cursor)
        pages.extend(m.ref for m in part.matches)
        if part.next_cursor is None or not part.matches:
            break
        cursor = part.next_cursor
    assert pages == [m.ref for m in result.matches]
    regex = grep(cx, r"ERR-\d+ at [0-9:]+", regex=True)
    assert [m.ref.split(":")[0] for m in regex.matches] == ["file"]
    with pytest.raises(InvalidInput, match="regex is not valid"):
        grep(cx, "(unclosed", regex=True)
    with pytest.raises(InvalidInput, match="empty"):
        grep(cx, "")


def test_grep_with_a_catastrophic_regex_stops_at_the_timeout(
    database: Database, cx: Context
) -> None:
    items = [OutlineItem("a" * 3000 + "!") for _ in range(40)]
    commands.create_page_from_outline(cx, "Backtracking", items)
    # Postgres's engine answers the classic (a+)+$ at once: no match, no timeout.
    quick = grep(cx, "(a+)+$", regex=True)
    assert quick.matches == []
    assert not quick.timed_out
    # Back-references force real backtracking; the scan stops at the limit and says so.
    slow_cx = replace(cx, settings=replace(cx.settings, grep_timeout_ms=500))
    answers: list[int] = []

    def search_meanwhile() -> None:
        answers.append(len(run(database, cx, "backtracking", mode="lexical").rows))

    started = time.monotonic()
    other = threading.Thread(target=search_meanwhile)
    other.start()
    stopped = grep(slow_cx, r"(.*)(.*)\2\1$", regex=True)
    other.join(10)
    assert time.monotonic() - started < 3
    assert stopped.timed_out
    assert stopped.next_cursor
    assert "SUBSPACE_GREP_TIMEOUT_MS" in stopped.message
    assert "incomplete" in stopped.message
    assert answers == [1]


def test_each_lexical_query_uses_its_indexes(database: Database, cx: Context) -> None:
    with database.pool.connection() as conn:
        ws = cx.actor.workspace_id
        kb = conn.execute("select id from kb.knowledge_bases where workspace_id = %s", (ws,))
        kb_id = kb.fetchone()["id"]  # type: ignore[index]
        conn.execute(
            "insert into kb.pages (workspace_id, kb_id, title) select %s, %s, 'page ' || i "
            "from generate_series(1, 3000) i",
            (ws, kb_id),
        )
        conn.execute(
            "insert into kb.nodes (workspace_id, page_id, position, text) "
            "select p.workspace_id, p.id, 0, 'bullet number ' || p.title from kb.pages p"
        )
        conn.execute("insert into kb.blobs (workspace_id, sha256, size, data) "
                     "values (%s, 'x', 1, 'x')", (ws,))  # fmt: skip
        conn.execute(
            "insert into kb.files (workspace_id, kb_id, name, blob_sha256, size, status) "
            "select %s, %s, 'f' || i, 'x', 1, 'ready' from generate_series(1, 3000) i",
            (ws, kb_id),
        )
        conn.execute(
            "insert into search.file_chunks (workspace_id, file_id, n, text) "
            "select workspace_id, id, 0, 'chunk of ' || name from kb.files"
        )
        conn.execute(
            "insert into kb.mail (workspace_id, kb_id, message_id, subject, raw_sha256) "
            "select %s, %s, '<' || i || '>', 'mail ' || i, 'x' from generate_series(1, 3000) i",
            (ws, kb_id),
        )
        conn.commit()
    # As autovacuum would: statistics, and the GIN pending lists merged into the indexes.
    with psycopg.connect(database.dsn, autocommit=True) as maintenance:
        for table in ("kb.pages", "kb.nodes", "kb.files", "search.file_chunks", "kb.mail"):
            maintenance.execute(f"vacuum analyze {table}")
    with database.pool.connection() as conn:
        scope = resolve_scope(conn, ws, cx.actor.user_id, kb_ids=None, kinds=None, tags=None,
                              max_knowledge_bases=50)  # fmt: skip
        tsq = build_tsqueries(conn, parse_query("rarewordxyz"), ws)
        averages = dict.fromkeys(registry.sources(), 3.0)

        def plan(query: Fragment) -> str:
            return "\n".join(
                r["QUERY PLAN"] for r in conn.execute("explain " + query.sql, query.params)
            )

        # Postgres's own ranker, and BM25 over every row while there is no lexical index.
        plans = [plan(ts_rank_cd_sql(scope, tsq, cap=100)), plan(bm25_sql(scope, tsq, averages,
                                                                         cap=100))]  # fmt: skip
        # The delta: the rows of the items written since the index's position.
        delta = plan(bm25_sql(scope, tsq, averages, cap=100, items=[uuid4()]))
    indexes = ("pages_title_tsv", "nodes_text_tsv", "file_chunks_text_tsv", "mail_tsv",
               "files_name_tsv", "mail_subject_tsv")  # fmt: skip
    for found in plans:
        for name in indexes:
            assert f"Bitmap Index Scan on {name}" in found, found
        for table in ("pages", "nodes", "file_chunks", "mail", "files"):
            assert f"Seq Scan on {table}" not in found, found
    assert "Seq Scan" not in delta, delta


def test_search_over_http(client: TestClient, database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "HTTP search")
    node = commands.add_node(cx, page.id, "The orchard gate code is 4471")
    index(database, cx)
    got = client.get("/api/search", params={"q": "orchard gate", "kind": "node"}).json()
    assert got["rows"][0]["id"] == str(node.id)
    assert got["rows"][0]["type"] == "node"
    assert got["legs"]["lexical"]["ran"]
    assert got["degraded"] == []
    posted = client.post(
        "/api/search", json={"query": "orchard", "mode": "lexical", "explain": True, "limit": 1}
    ).json()
    assert posted["rows"][0]["explain"]["terms"][0]["leg"] == "lexical"
    assert client.get("/api/search", params={"q": ""}).status_code == 422
    too_long = client.get("/api/search", params={"q": "x" * 5000})
    assert too_long.status_code == 422
    assert "SUBSPACE_MAX_QUERY_CHARS" in too_long.json()["error"]["message"]
    bad_tag = client.post("/api/search", json={"query": "x", "tags": [
        {"tag": "nope", "op": "eq", "value": "y"}]})  # fmt: skip
    assert bad_tag.status_code == 422
    assert "Unknown tag" in bad_tag.json()["error"]["message"]
    grep = client.get("/api/grep", params={"pattern": "4471"}).json()
    assert grep["matches"][0]["ref"] == f"node:{node.id}"
    read = client.post("/api/tools/kb.read", json={"arguments": {"page_id": str(page.id)}})
    assert read.json()["text"].startswith("# HTTP search")
    assert client.post("/api/tools/kb.delete", json={}).status_code == 404
    assert client.get("/api/tools").json()[0]["name"] == "kb.search"


def test_search_grep_and_read_on_the_command_line(
    settings: Settings, database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
    monkeypatch.setenv("PROVIDERS", "fake")
    page = commands.create_page(cx, "Garden")
    commands.add_node(cx, page.id, "Prune the quince in February")
    index(database, cx)
    runner = CliRunner()
    table = runner.invoke(main, ["search", "quince", "--explain"])
    assert table.exit_code == 0, table.output
    assert "Prune the quince" in table.stdout
    assert "result in" in table.stdout
    as_json = json.loads(runner.invoke(main, ["search", "quince", "--json", "--mode",
                                              "lexical"]).stdout)  # fmt: skip
    assert as_json["rows"][0]["title"] == "Garden"
    assert as_json["mode"] == "lexical"
    assert "Prune the quince" in runner.invoke(main, ["grep", "QUINCE"]).stdout
    assert runner.invoke(main, ["read", "Garden"]).stdout.startswith("# Garden")
    missing = runner.invoke(main, ["search", "quince", "--kb", "Nope"])
    assert missing.exit_code == 1
    assert "No knowledge base named 'Nope'" in missing.output
    bad = runner.invoke(main, ["search", ""])
    assert bad.exit_code == 1
    assert "empty" in bad.output


def test_the_search_command_shows_what_it_corrected(
    settings: Settings, database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
    monkeypatch.setenv("PROVIDERS", "fake")
    page = commands.create_page(cx, "Materials")
    commands.add_node(cx, page.id, "Biomaterials for bone repair")
    index(database, cx)
    runner = CliRunner()
    table = runner.invoke(main, ["search", "biomateirals bone", "--mode", "lexical"])
    assert table.exit_code == 0, table.output
    assert 'Showing results for "biomaterials bone" (you typed biomateirals).' in table.stdout
    plain = runner.invoke(main, ["search", "biomaterials", "--mode", "lexical"])
    assert "Showing results" not in plain.stdout
    as_json = runner.invoke(main, ["search", "biomateirals", "--json", "--mode", "lexical"])
    assert json.loads(as_json.stdout)["corrections"] == {"biomateirals": "biomaterials"}
