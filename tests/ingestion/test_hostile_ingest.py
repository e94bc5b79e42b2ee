"""Reproductions of attacks on ingestion: slow and deep documents and mail, workspaces
competing for extraction, orphaned extraction children, duplicate uploads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.ingest.extract import ExtractLimits
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.html import html_text
from subspace.ingest.isolation import extract_isolated
from subspace.ingest.worker import extract_pending
from subspace.models import Actor
from subspace.workspaces import create_workspace
from tests.conftest import make_client
from tests.samples import make_email, make_mbox

ROOT = Path(__file__).resolve().parents[2]
LIMITS = ExtractLimits(
    max_chars=1_000_000,
    max_pdf_pages=50,
    max_archive_inflated_bytes=20 * 1024 * 1024,
    max_archive_entries=500,
    max_html_depth=512,
)
# Nested deep enough that the HTML parser needs seconds once the depth check is lifted.
DEEP_HTML = "<div>" * 60_000 + "x" + "</div>" * 60_000


def other_actor(database: Database, name: str = "Other company") -> Actor:
    with database.pool.connection() as conn:
        return create_workspace(conn, name)


def nested_multipart(levels: int) -> bytes:
    head = b"Message-ID: <deep@x>\r\nSubject: deep\r\nFrom: a@example.com\r\n"
    opening = b"".join(
        b'Content-Type: multipart/mixed; boundary="b%d"\r\n\r\n--b%d\r\n' % (n, n)
        for n in range(levels)
    )
    closing = b"".join(b"--b%d--\r\n" % n for n in reversed(range(levels)))
    return head + opening + b"Content-Type: text/plain\r\n\r\nhello\r\n" + closing


def nested_messages(levels: int) -> bytes:
    head = b"Message-ID: <inner@x>\r\nSubject: deep\r\nFrom: a@example.com\r\n"
    return head + b"Content-Type: message/rfc822\r\n\r\n" * levels + b"Subject: in\r\n\r\nhi\r\n"


# 1. HTML pre-scan and mail parsing off the request path


@pytest.mark.parametrize("repeats", [40_000, 400_000])
def test_tag_starts_without_an_end_are_scanned_in_linear_time(repeats: int) -> None:
    # "<a" with no ">" anywhere made the nesting scan quadratic: 49 s at 40,000.
    extracted = extract_isolated(
        b"<a" * repeats, "a.html", "", LIMITS, timeout_s=10, memory_bytes=1024 << 20
    )
    assert extracted.kind == "html"


def test_the_depth_limit_still_holds_after_the_linear_scan() -> None:
    with pytest.raises(ExtractionFailed, match="SUBSPACE_MAX_HTML_DEPTH"):
        html_text("<a" * 1_000 + "<div>" * 300 + "x", 256)
    assert html_text("<div>" * 200 + "fine" + "</div>" * 200, 256) == "fine"
    assert html_text("<br/>" * 300 + "<img src='x'>" * 300 + "ok", 256) == "ok"


def test_a_slow_mail_is_cut_at_the_deadline_while_the_server_answers(
    database: Database, settings: Settings, actor: Actor
) -> None:
    slow = replace(settings, extract_timeout_s=2, max_html_depth=10_000_000)
    client = make_client(database, slow, actor)
    raw = make_email("Deep", "", html=DEEP_HTML, message_id="<deep@x>")
    answers: list[Any] = []
    thread = threading.Thread(
        target=lambda: answers.append(
            client.post("/api/mail/import", files={"file": ("deep.eml", raw)})
        )
    )
    started = time.monotonic()
    thread.start()
    time.sleep(0.3)
    health_started = time.monotonic()
    assert client.get("/healthz").status_code == 200
    assert time.monotonic() - health_started < 1
    thread.join()
    assert time.monotonic() - started < 10
    response = answers[0]
    assert response.status_code == 422, response.text
    assert "SUBSPACE_EXTRACT_TIMEOUT_S" in response.json()["error"]["message"]
    assert client.get("/api/mail").json() == []


def test_a_slow_message_fails_alone_in_its_mailbox(
    database: Database, settings: Settings, actor: Actor
) -> None:
    slow = replace(settings, extract_timeout_s=2, max_html_depth=10_000_000)
    client = make_client(database, slow, actor)
    mbox = make_mbox(
        [
            make_email("Before", "first", message_id="<before@x>"),
            make_email("Deep", "", html=DEEP_HTML, message_id="<deep@x>"),
            make_email("After", "last", message_id="<after@x>"),
        ]
    )
    response = client.post("/api/mail/import", files={"file": ("inbox.mbox", mbox)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["counts"] == {"added": 2, "failed": 1}
    assert "SUBSPACE_EXTRACT_TIMEOUT_S" in body["rows"][1]["detail"]
    assert {m["subject"] for m in client.get("/api/mail").json()} == {"Before", "After"}


# 2. Mail the standard library's parser cannot take, and files that are not mail


@pytest.mark.parametrize("raw", [nested_multipart(1_500), nested_messages(1_500)])
def test_over_deep_mime_nesting_is_refused_naming_the_limit(client: TestClient, raw: bytes) -> None:
    response = client.post("/api/mail/import", files={"file": ("deep.eml", raw)})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "100 levels" in message
    assert "SUBSPACE_MAX_MIME_DEPTH" in message
    # In a mailbox the deep message fails alone.
    mbox = make_mbox([raw, make_email("Fine", "body", message_id="<fine@x>")])
    body = client.post("/api/mail/import", files={"file": ("in.mbox", mbox)}).json()
    assert body["counts"] == {"failed": 1, "added": 1}


def test_nesting_within_the_limit_is_read(client: TestClient) -> None:
    response = client.post("/api/mail/import", files={"file": ("ok.eml", nested_multipart(90))})
    assert response.json()["counts"] == {"added": 1}, response.text


@pytest.mark.parametrize(
    "date", ["Fri, 31 Dec 9999 23:00:00 -0500", "Fri, 31 Dec 9999 23:59:59 -0001"]
)
def test_a_date_outside_the_representable_years_keeps_the_mail_undated(
    client: TestClient, date: str
) -> None:
    raw = (
        b"Message-ID: <far@x>\r\nSubject: far\r\nFrom: a@example.com\r\n"
        + f"Date: {date}\r\n\r\nbody\r\n".encode()
    )
    response = client.post("/api/mail/import", files={"file": ("far.eml", raw)})
    assert response.status_code == 200, response.text
    listed = client.get("/api/mail")
    assert listed.status_code == 200, listed.text
    assert [(m["subject"], m["sent_at"]) for m in listed.json()] == [("far", None)]


def test_an_unrepresentable_date_sent_to_the_api_is_refused(client: TestClient) -> None:
    response = client.post(
        "/api/mail",
        json={"message_id": "<far@x>", "subject": "far", "sent_at": "9999-12-31T23:00:00-05:00"},
    )
    assert response.status_code == 422, response.text
    assert "years 1 to 9999" in response.json()["error"]["message"]
    assert client.get("/api/mail").json() == []


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4),
        ("noise.eml", os.urandom(4096)),
        ("empty.eml", b""),
        ("empty.mbox", b""),
    ],
)
def test_a_file_that_is_not_mail_is_refused_saying_what_is_accepted(
    client: TestClient, name: str, data: bytes
) -> None:
    response = client.post("/api/mail/import", files={"file": (name, data)})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert ".eml" in message, message
    assert ".mbox" in message, message
    assert client.get("/api/mail").json() == []


# 3. Fair extraction across workspaces


def test_workspaces_take_turns_for_extraction(
    database: Database, settings: Settings, cx: Context
) -> None:
    slow = replace(settings, extract_timeout_s=1, max_html_depth=10_000_000)
    first = commands.upload_file(cx, "slow-1.html", DEEP_HTML.encode())
    second = commands.upload_file(cx, "slow-2.html", DEEP_HTML.encode())
    theirs = database.context(other_actor(database), settings)
    small = commands.upload_file(theirs, "note.txt", b"eighteen bytes ok.")
    assert extract_pending(database, slow) == 3
    with database.pool.connection() as conn:
        order = [
            row["file_id"]
            for row in conn.execute(
                "select payload->>'file_id' as file_id from kb.outbox "
                "where event = 'file.extracted' order by id"
            ).fetchall()
        ]
    assert order == [str(first.id), str(small.id), str(second.id)]


def test_another_workspaces_small_file_is_not_held_up_by_slow_ones(
    database: Database, settings: Settings, actor: Actor
) -> None:
    slow = replace(settings, extract_timeout_s=4, max_html_depth=10_000_000)
    assert slow.extract_workers == 2
    mine = make_client(database, slow, actor)
    theirs = make_client(database, slow, other_actor(database))
    with TestClient(mine.app, headers=dict(mine.headers)) as live:
        for n in range(2):
            deep = f"<p>{n}</p>{DEEP_HTML}".encode()
            up = live.post("/api/files", files={"file": (f"slow-{n}.html", deep)})
            assert up.status_code == 201, up.text
        time.sleep(0.2)  # both slow files are taken first
        started = time.monotonic()
        note = theirs.post("/api/files", files={"file": ("note.txt", b"eighteen bytes ok.")})
        # The other workspace's client is another app: wake the serving app's workers.
        cast(FastAPI, live.app).state.extractor.wake()
        status = "processing"
        while status == "processing" and time.monotonic() - started < 30:
            time.sleep(0.05)
            status = theirs.get(f"/api/files/{note.json()['id']}").json()["status"]
        waited = time.monotonic() - started
        assert status == "ready"
        # One worker is busy with a slow file, the other serves the other workspace.
        assert waited < 3, f"waited {waited:.1f} s behind another workspace's files"


def test_a_file_that_times_out_is_attempted_once(
    database: Database, settings: Settings, cx: Context
) -> None:
    slow = replace(settings, extract_timeout_s=1, max_html_depth=10_000_000)
    stuck = commands.upload_file(cx, "slow.html", DEEP_HTML.encode())
    assert extract_pending(database, slow, workers=2) == 1
    assert extract_pending(database, slow, workers=2) == 0
    with cx.transaction() as conn:
        row = queries.get_file(conn, cx.actor.workspace_id, stuck.id)
        attempts = conn.execute(
            "select count(*) as n from kb.outbox where event = 'file.extracted'"
        ).fetchone()
    assert row.status == "failed"
    assert "SUBSPACE_EXTRACT_TIMEOUT_S" in (row.status_reason or "")
    assert attempts == {"n": 1}


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_parser_child_is_a_session_of_its_own_that_yields_the_cores() -> None:
    """Its niceness would count only against its parent's session otherwise (priority.py)."""
    from subspace.ingest.isolation import PARSER_NICENESS, IsolatedExtractor
    from tests.surfaces.test_processes import claim_on_cores

    extractor = IsolatedExtractor(512 * 1024 * 1024)
    try:
        extractor.run(time.sleep, (0,), 30)
        assert extractor.pid is not None
        leads, niceness, group = claim_on_cores(extractor.pid)
        mine = os.nice(0)
        assert (leads, niceness) == (True, min(19, mine + PARSER_NICENESS))
        assert group in (None, PARSER_NICENESS)
    finally:
        extractor.close()


# 4. Extraction children die with the server

ORPHAN_SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    from subspace.ingest.isolation import IsolatedExtractor

    if __name__ == "__main__":
        extractor = IsolatedExtractor(512 * 1024 * 1024)
        threading.Thread(
            target=extractor.run, args=(time.sleep, (600,), 600), daemon=True
        ).start()
        while extractor.pid is None:
            time.sleep(0.01)
        time.sleep(0.5)  # the child is busy with its job
        print(extractor.pid, flush=True)
        time.sleep(600)
    """
)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_extraction_children_exit_when_the_server_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(ORPHAN_SCRIPT)
    server = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert server.stdout is not None
    child = int(server.stdout.readline())
    with open(f"/proc/{child}/stat") as stat:
        forkserver = int(stat.read().split(") ", 1)[1].split()[1])
    assert alive(child)
    assert alive(forkserver)
    server.send_signal(signal.SIGKILL)
    server.wait()
    deadline = time.monotonic() + 5
    while (alive(child) or alive(forkserver)) and time.monotonic() < deadline:
        time.sleep(0.05)
    leftovers = [pid for pid in (child, forkserver) if alive(pid)]
    for pid in leftovers:  # do not leave them running when the assertion fails
        os.kill(pid, signal.SIGKILL)
    assert leftovers == []


# 5. Duplicate uploads


def test_uploading_the_same_bytes_again_returns_the_stored_file(
    client: TestClient, database: Database
) -> None:
    first = client.post("/api/files", files={"file": ("report.txt", b"quarterly numbers")})
    assert first.status_code == 201
    assert first.json()["already_stored"] is False
    again = client.post("/api/files", files={"file": ("copy of report.txt", b"quarterly numbers")})
    assert again.status_code == 200, again.text
    assert again.json()["already_stored"] is True
    assert again.json()["id"] == first.json()["id"]
    # The 200 is documented next to the 201, with the same shape.
    declared = client.get("/openapi.json").json()["paths"]["/api/files"]["post"]["responses"]
    assert declared["200"]["content"] == declared["201"]["content"]
    assert [f["name"] for f in client.get("/api/files").json()] == ["report.txt"]
    # Another knowledge base is another collection: it gets its own copy.
    kb = client.post("/api/knowledge-bases", json={"name": "Archive"}).json()
    elsewhere = client.post(
        "/api/files",
        files={"file": ("report.txt", b"quarterly numbers")},
        data={"kb_id": kb["id"]},
    )
    assert elsewhere.status_code == 201
    assert elsewhere.json()["id"] != first.json()["id"]
