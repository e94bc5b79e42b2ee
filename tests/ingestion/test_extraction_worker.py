"""The extraction worker on a real database: statuses, text, events, isolation."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from fastapi.testclient import TestClient

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.ingest.worker import CHUNKS_PER_STATEMENT, extract_pending, store_file_chunks
from subspace.splitting import Piece
from tests.samples import make_docx, make_encrypted_pdf, make_pdf, make_zip_bomb


def file_text(cx: Context, file_id: object) -> str | None:
    with cx.transaction() as conn:
        row = conn.execute(
            "select text from search.file_text where file_id = %s", (file_id,)
        ).fetchone()
    return None if row is None else str(row["text"])


def test_upload_then_extract_marks_ready_or_failed(
    database: Database, settings: Settings, cx: Context
) -> None:
    good = commands.upload_file(cx, "guide.pdf", make_pdf(["Badges at reception"]))
    locked = commands.upload_file(cx, "locked.pdf", make_encrypted_pdf("secret"))
    odd = commands.upload_file(cx, "photo.jpg", b"\xff\xd8\xff\xe0", content_type="image/jpeg")
    doc = commands.upload_file(cx, "plan.docx", make_docx(["Quarterly plan"]))
    assert good.status == "processing"
    assert file_text(cx, good.id) is None
    assert extract_pending(database, settings) == 4
    assert extract_pending(database, settings) == 0
    with cx.transaction() as conn:
        rows = {f.name: f for f in queries.list_files(conn, cx.actor.workspace_id)}
        events = conn.execute(
            "select payload from kb.outbox where event = 'file.extracted' order by id"
        ).fetchall()
    assert rows["guide.pdf"].status == "ready"
    assert rows["guide.pdf"].text_truncated is False
    assert "Badges at reception" in (file_text(cx, good.id) or "")
    assert "Quarterly plan" in (file_text(cx, doc.id) or "")
    assert (rows["locked.pdf"].status, rows["photo.jpg"].status) == ("failed", "failed")
    assert "encrypted" in (rows["locked.pdf"].status_reason or "")
    assert rows["photo.jpg"].status_reason == (
        "unsupported type image/jpeg: Subspace reads PDF, Word (.docx), HTML, Markdown and text"
    )
    assert file_text(cx, locked.id) is None
    assert file_text(cx, odd.id) is None
    # The blob of a failed file is kept, so a later fix can extract it again.
    with cx.transaction() as conn:
        assert queries.read_blob(conn, cx.actor.workspace_id, rows["locked.pdf"].sha256)
    assert [e["payload"]["ok"] for e in events] == [True, False, False, True]


def test_a_file_over_the_memory_cap_fails_and_the_next_one_flows(
    database: Database, settings: Settings, cx: Context
) -> None:
    # The cap counts the child's whole address space, about 150 MB before any document: 200 MB
    # leaves a small file room and a 50 MB one none.
    tight = replace(settings, extract_memory_mb=200, max_upload_bytes=64 * 1024 * 1024)
    big = commands.upload_file(replace(cx, settings=tight), "huge.txt", b"word " * 10_000_000)
    small = commands.upload_file(cx, "small.txt", b"still extracted")
    extract_pending(database, tight)
    with cx.transaction() as conn:
        big_row = queries.get_file(conn, cx.actor.workspace_id, big.id)
        small_row = queries.get_file(conn, cx.actor.workspace_id, small.id)
    assert big_row.status == "failed"
    assert "SUBSPACE_EXTRACT_MEMORY_MB" in (big_row.status_reason or "")
    assert small_row.status == "ready", small_row.status_reason


def test_a_slow_extraction_is_stopped_at_the_deadline(
    database: Database, settings: Settings, cx: Context
) -> None:
    # 60,000 nested elements with the depth check lifted: the parser needs seconds.
    slow = replace(settings, extract_timeout_s=1, max_html_depth=10_000_000)
    deep = ("<div>" * 60_000 + "x" + "</div>" * 60_000).encode()
    stuck = commands.upload_file(cx, "deep.html", deep)
    after = commands.upload_file(cx, "after.md", b"# next in line")
    started = time.monotonic()
    extract_pending(database, slow)
    assert time.monotonic() - started < 5
    with cx.transaction() as conn:
        row = queries.get_file(conn, cx.actor.workspace_id, stuck.id)
        next_row = queries.get_file(conn, cx.actor.workspace_id, after.id)
    assert row.status == "failed"
    assert "SUBSPACE_EXTRACT_TIMEOUT_S" in (row.status_reason or "")
    # The stuck child was replaced; the next file is extracted by a fresh one.
    assert next_row.status == "ready"


def test_two_workers_never_extract_the_same_file(
    database: Database, settings: Settings, cx: Context
) -> None:
    for i in range(6):
        commands.upload_file(cx, f"n{i}.txt", f"note {i}".encode())
    counts: list[int] = []
    workers = [
        threading.Thread(target=lambda: counts.append(extract_pending(database, settings)))
        for _ in range(2)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sum(counts) == 6
    with cx.transaction() as conn:
        n = conn.execute("select count(*) as n from kb.outbox where event = 'file.extracted'")
        assert n.fetchone() == {"n": 6}


def test_the_app_extracts_uploads_in_the_background(
    database: Database, settings: Settings, client: TestClient
) -> None:
    with TestClient(client.app, headers=dict(client.headers)) as live:
        up = live.post("/api/files", files={"file": ("a.docx", make_docx(["Background"]))})
        bomb = live.post("/api/files", files={"file": ("b.docx", make_zip_bomb(300 << 20))})
        assert up.json()["status"] == "processing"
        deadline = time.monotonic() + 20
        statuses: dict[str, str] = {}
        while time.monotonic() < deadline:
            statuses = {f["name"]: f["status"] for f in live.get("/api/files").json()}
            if "processing" not in statuses.values():
                break
            time.sleep(0.1)
        assert statuses == {"a.docx": "ready", "b.docx": "failed"}
        reason = live.get(f"/api/files/{bomb.json()['id']}").json()["status_reason"]
        assert "SUBSPACE_MAX_ARCHIVE_INFLATED_BYTES" in reason


def test_chunks_are_written_a_few_hundred_a_statement(database: Database, cx: Context) -> None:
    """The text statistics and postings triggers run once per statement: a file of random
    bytes, all words no other chunk holds, took 12 ms a chunk written one by one (a 5 MB file
    485 s). Counted here by a trigger of the test's own."""
    stored = commands.upload_file(cx, "notes.txt", b"placeholder", content_type="text/plain")
    ws = cx.actor.workspace_id
    pieces = [f"piece {n} holds the word w{n}x" for n in range(2 * CHUNKS_PER_STATEMENT + 50)]
    with database.pool.connection() as conn, conn.transaction():
        conn.execute("create temporary table statements (n int)")
        conn.execute(
            "create function pg_temp.count_statement() returns trigger language plpgsql as "
            "$$ begin insert into statements values (1); return null; end $$"
        )
        conn.execute(
            "create trigger count_statement after insert on search.file_chunks "
            "for each statement execute function pg_temp.count_statement()"
        )
        store_file_chunks(conn, ws, stored.id, [Piece(p) for p in pieces])
        counted = conn.execute("select count(*) as n from statements").fetchone()
        conn.execute("drop trigger count_statement on search.file_chunks")
    assert counted == {"n": 3}
    with database.pool.connection() as conn:
        rows = conn.execute(
            "select n, text from search.file_chunks where workspace_id = %s and file_id = %s "
            "order by n",
            (ws, stored.id),
        ).fetchall()
        stats = conn.execute(
            "select ndocs from search.source_stats where workspace_id = %s and source = 'file'",
            (ws,),
        ).fetchone()
    assert [(row["n"], row["text"]) for row in rows] == list(enumerate(pieces))
    assert stats == {"ndocs": len(pieces)}
    with database.pool.connection() as conn, conn.transaction():
        store_file_chunks(
            conn, ws, stored.id, [Piece(p) for p in pieces[:5]]
        )  # text again, shorter
        left = conn.execute(
            "select count(*) as n from search.file_chunks where file_id = %s", (stored.id,)
        ).fetchone()
    assert left == {"n": 5}


def test_a_claim_reads_a_few_rows_however_many_files_wait(
    database: Database, settings: Settings, cx: Context
) -> None:
    """Claiming the next file finds the waiting workspaces and each one's oldest file through
    an index, without sorting every waiting file: a bulk upload's claims would otherwise cost
    a time growing with the square of its size."""
    from subspace.ingest.worker import _CLAIM

    commands.upload_file(cx, "first.txt", b"the first file")
    with cx.transaction() as conn:
        conn.execute(
            "insert into kb.files (workspace_id, kb_id, name, content_type, blob_sha256, size) "
            "select f.workspace_id, f.kb_id, 'copy ' || n || '.txt', f.content_type, "
            "f.blob_sha256, f.size from kb.files f, generate_series(1, 3000) n"
        )
        conn.execute("analyze kb.files")
        params: dict[str, Any] = {"served": [], "turns": [], "only": None, "full": []}
        plan = conn.execute("explain (analyze, format json) " + _CLAIM, params).fetchone()
    assert plan is not None
    nodes: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        nodes.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["QUERY PLAN"][0]["Plan"])
    read = sum(n["Actual Rows"] * n["Actual Loops"] for n in nodes if "Scan" in n["Node Type"])
    assert read < 50, read
    # What is sorted is the waiting workspaces (here one), never the waiting files.
    assert all(n["Actual Rows"] <= 1 for n in nodes if n["Node Type"] == "Sort")
