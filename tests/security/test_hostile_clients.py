"""Inputs and situations a hostile or unlucky client brings, each found against a running server."""

from __future__ import annotations

import dataclasses
import socket
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.db.locks import SERVER_LOCK_KEY
from subspace.keys import create_key
from subspace.workspaces import create_workspace, list_workspaces
from tests.conftest import make_client
from tests.surfaces.test_lifecycle import Served, busy_request, closed_by_server, home  # noqa: F401


def test_a_workspace_can_be_created_while_a_server_holds_the_database(database: Database) -> None:
    # `subspace serve` holds its shared lock for its lifetime; creating a workspace (the CLI or
    # POST /api/admin/workspaces) must not wait for that lock, or it waits forever.
    with psycopg.connect(database.dsn, autocommit=True) as server:
        server.execute("select pg_advisory_lock_shared(%s)", (SERVER_LOCK_KEY,))
        with database.pool.connection() as conn:
            conn.execute("set lock_timeout = '2s'")
            actor = create_workspace(conn, "Acme")
            assert [w.name for w in list_workspaces(conn, actor.workspace_id)] == ["Acme"]


def test_mail_fields_that_are_not_plain_ascii_headers_never_answer_500(client: TestClient) -> None:
    # RFC 6532 allows UTF-8 in Message-IDs; the raw message stored beside the fields says so.
    stored = client.post("/api/mail", json={"message_id": "<ø日本@example.com>", "subject": "é"})
    assert stored.status_code == 201, stored.text
    assert client.get(f"/api/mail/{stored.json()['id']}").json()["message_id"] == (
        "<ø日本@example.com>"
    )
    # Stray quotes and brackets trip the standard library's header parser.
    for field, value in [("message_id", "<<"), ("sender", '"'), ("recipients", '"')]:
        body = {"message_id": "<stray@example.com>", field: value}
        refused = client.post("/api/mail", json=body)
        assert refused.status_code == 422, (field, refused.text)
        message = refused.json()["error"]["message"]
        assert "cannot be written as a mail header" in message
        assert "example.com>" in message
    assert [m["id"] for m in client.get("/api/mail").json()] == [stored.json()["id"]]


def test_an_unknown_tool_name_is_answered_with_the_tools_there_are(client: TestClient) -> None:
    missing = client.post("/api/tools/search", json={"arguments": {"query": "x"}})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == (
        "No tool is named 'search'. The tools are kb.search, kb.grep, kb.read and kb.node.read "
        "(GET /api/tools)."
    )
    long = client.post("/api/tools/" + "x" * 5000, json={})
    assert long.status_code == 404
    assert len(long.json()["error"]["message"]) < 300


@pytest.mark.parametrize(
    ("body", "where"),
    [(b"{", "character 1: Expecting property name enclosed in double quotes"),
     (b'{"title": }', "character 10: Expecting value"),
     (b"{'title': 'x'}", "character 1: Expecting property name enclosed in double quotes")],
)  # fmt: skip
def test_a_body_that_is_not_json_is_told_so(client: TestClient, body: bytes, where: str) -> None:
    answer = client.post("/api/pages", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422
    assert answer.json()["error"]["message"] == (
        f"The request body is not valid JSON (at {where}). Send a JSON object."
    )


@pytest.mark.slow
def test_a_request_body_that_stops_coming_is_closed_and_frees_its_connection(
    home: Path,  # noqa: F811
    settings: Settings,
) -> None:
    served = Served(
        home,
        SUBSPACE_DATABASE_URL=settings.database_url,
        SUBSPACE_HEADER_TIMEOUT_S="2",
        SUBSPACE_MAX_CONNECTIONS="20",
    )
    try:
        body = b'{"title": "slow"}'
        dripping = socket.create_connection(("127.0.0.1", served.port))
        dripping.sendall(
            b"POST /api/pages HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n"
            b"authorization: Bearer " + served.token.encode() + b"\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        # Every other connection the cap allows sends its headers and a byte of its body.
        stalled = [busy_request(served.port, served.token) for _ in range(19)]
        started = time.monotonic()
        for part in (body[:4], body[4:8], body[8:12], body[12:]):
            time.sleep(1)  # slower than the deadline in all, but never silent for as long
            dripping.sendall(part)
        dripping.settimeout(5)
        assert dripping.recv(4096).startswith(b"HTTP/1.1 201")
        assert time.monotonic() - started >= 4
        # The silent ones were closed at the deadline and their connections freed.
        for sock in stalled:
            sock.settimeout(1)
            assert sock.recv(4096).startswith(b"HTTP/1.1 408")
            assert closed_by_server(sock, timeout=1)
        assert httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200
    finally:
        assert served.stop() == 0, served.output


def test_json_nested_too_deeply_is_told_so(client: TestClient, cx: Context) -> None:
    page = commands.create_page(cx, "Deep")
    props = '{"a":' * 100_000 + "1" + "}" * 100_000
    body = f'{{"page_id": "{page.id}", "text": "deep", "props": {props}}}'
    answer = client.post("/api/nodes", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == (
        "The request body is JSON nested too deeply to read. Send a flatter document."
    )


def test_key_names_are_cleaned_like_every_other_name(
    database: Database, cx: Context, client: TestClient
) -> None:
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "operator", admin=True)
    admin = TestClient(client.app, headers={"authorization": f"Bearer {token}"})
    url = f"/api/admin/workspaces/{cx.actor.workspace_id}/keys"
    raw = '{"name": "ci\\u0000 \\ud800 key"}'
    made = admin.post(url, content=raw, headers={"content-type": "application/json"})
    assert made.status_code == 201, made.text
    assert made.json()["key"]["name"] == "ci \ufffd key"
    long = admin.post(url, json={"name": "k" * 100_000})
    assert long.status_code == 413
    assert "the limit is 200" in long.json()["error"]["message"]


def test_cli_names_with_undecodable_bytes_are_looked_up_cleaned(
    runner: CliRunner, cx: Context, tmp_path: Path
) -> None:
    # A byte that is not UTF-8 reaches Python as a lone surrogate (surrogateescape).
    for args, said in [
        (["keys", "create", "--workspace", "\udcff"], "No workspace is named '\ufffd'"),
        (["kb", "list", "--workspace", "\udcff"], "No workspace is named '\ufffd'"),
        (["read", "\udcff"], "No page titled"),
        (["keys", "create", "--name", "\udcff"], "Created key"),
    ]:
        result = runner.invoke(main, args)
        assert said in result.output, (args, result.output, result.exception)
        assert not isinstance(result.exception, UnicodeEncodeError), args
    # A name is found as it is stored: cleaned, spaces trimmed.
    commands.create_knowledge_base(cx, "Research")
    note = tmp_path / "note.md"
    note.write_text("# Note\n\n- a bullet\n")
    imported = runner.invoke(main, ["import", str(note), "--kb", " Research "])
    assert imported.exit_code == 0, imported.output
    with cx.transaction() as conn:
        names = [kb.name for kb in queries.list_knowledge_bases(conn, cx.actor.workspace_id)]
    assert sorted(names) == ["Default", "Research"]


def mailbox(count: int) -> bytes:
    return b"".join(
        b"From a@example.com Mon Jan  1 00:00:00 2024\nFrom: a@example.com\n"
        b"Subject: m%d\nMessage-ID: <m%d@example.com>\n\nbody %d\n\n" % (i, i, i)
        for i in range(count)
    )


def test_a_mailbox_over_the_message_limit_is_refused_whole(
    database: Database, settings: Settings, cx: Context
) -> None:
    # 100,000 messages took about 28 minutes in one request; the client gave up long before.
    capped = dataclasses.replace(settings, max_mailbox_messages=3)
    client = make_client(database, capped, cx.actor)
    refused = client.post("/api/mail/import", files={"file": ("big.mbox", mailbox(4))})
    assert refused.status_code == 413
    assert refused.json()["error"]["message"] == (
        "big.mbox holds 4 messages; the limit for one upload is 3 (SUBSPACE_MAX_MAILBOX_MESSAGES). "
        "Split the mailbox, import it with `subspace import`, or raise the limit."
    )
    assert client.get("/api/mail").json() == []
    taken = client.post("/api/mail/import", files={"file": ("small.mbox", mailbox(3))})
    assert taken.status_code == 200
    assert taken.json()["counts"] == {"added": 3}


def test_the_bullets_of_a_deleted_page_take_no_writes_until_it_is_restored(
    client: TestClient, cx: Context
) -> None:
    page = commands.create_page(cx, "Trash")
    first = commands.add_node(cx, page.id, "first")
    second = commands.add_node(cx, page.id, "second")
    commands.delete_page(cx, page.id)
    writes = [
        ("PATCH", f"/api/nodes/{first.id}", {"text": "edited"}),
        ("PATCH", f"/api/nodes/{first.id}", {"props": {"x": 1}}),
        ("POST", f"/api/nodes/{second.id}/move", {"position": 0}),
        ("POST", f"/api/nodes/{second.id}/indent", None),
        ("DELETE", f"/api/nodes/{second.id}", None),
    ]
    for method, url, body in writes:
        refused = client.request(method, url, json=body)
        assert refused.status_code == 409, (method, url, refused.text)
        assert "is deleted" in refused.json()["error"]["message"]
        assert f"/api/pages/{page.id}/restore" in refused.json()["error"]["message"]
    commands.restore_page(cx, page.id)
    tree = client.get(f"/api/pages/{page.id}").json()["nodes"]
    assert [(n["text"], n["props"]) for n in tree] == [("first", {}), ("second", {})]
    assert client.patch(f"/api/nodes/{first.id}", json={"text": "edited"}).status_code == 200
