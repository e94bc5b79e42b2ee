"""Another workspace's ids answer 404 on every route, and change nothing."""

from __future__ import annotations

import tempfile
from typing import Any

from fastapi.testclient import TestClient

from subspace import commands
from subspace.answers.runs import enqueue_run
from subspace.context import Context
from subspace.database import Database
from subspace.sessions import create_signin_code, start_session
from subspace.sources import model
from subspace.workspaces import create_workspace
from tests.conftest import api_operations, make_client


def other_workspace(database: Database, cx: Context) -> dict[str, Any]:
    with database.pool.connection() as conn:
        actor = create_workspace(conn, "Other company")
    theirs = database.context(actor, cx.settings)
    page = commands.create_page(theirs, "Their secret plan")
    node = commands.add_node(theirs, page.id, "their bullet")
    file = commands.upload_file(theirs, "their.txt", b"theirs")
    mail = commands.add_mail(theirs, message_id="<theirs@x>", subject="theirs")
    tag = commands.create_tag(theirs, "owner", "text")
    run = enqueue_run(theirs, "their question", page_id=page.id)
    folder = model.folder_config(tempfile.mkdtemp(prefix="their-notes-"))
    source = model.add_source(theirs, "their notes", "folder", folder)
    with database.pool.connection() as conn:
        kb = conn.execute(
            "select id from kb.knowledge_bases where workspace_id = %s", (actor.workspace_id,)
        ).fetchone()
        session, _ = start_session(conn, create_signin_code(conn, actor, 5), days=1)
    assert kb is not None
    return {
        "cx": theirs,
        "page_id": page.id,
        "node_id": node.id,
        "file_id": file.id,
        "mail_id": mail.id,
        "tag_id": tag.id,
        "run_id": run.id,
        "kb_id": kb["id"],
        "session_id": session.id,
        "source_id": source.id,
        "workspace_id": actor.workspace_id,
    }


def snapshot(database: Database) -> list[Any]:
    with database.pool.connection() as conn:
        return conn.execute(
            "select (select array_agg(title || archived_at::text || deleted_at::text "
            "        order by id) from kb.pages) as pages,"
            " (select array_agg(text order by id) from kb.nodes) as nodes,"
            " (select array_agg(enabled::text || coalesce(deleted_at::text, '') order by id)"
            "   from kb.files) as files,"
            " (select count(*) from kb.tag_values) as tags,"
            " (select count(*) from kb.exclusions) as exclusions,"
            " (select count(*) from kb.sessions where ended_at is null) as sessions,"
            " (select array_agg(status || coalesce(secret::text, '') order by id)"
            "   from kb.sources) as sources"
        ).fetchall()


def test_every_route_hides_another_workspaces_ids(
    database: Database, cx: Context, client: TestClient
) -> None:
    theirs = other_workspace(database, cx)
    mine = commands.create_page(cx, "Mine")
    before = snapshot(database)
    ids = {
        "page_id": theirs["page_id"],
        "node_id": theirs["node_id"],
        "file_id": theirs["file_id"],
        "mail_id": theirs["mail_id"],
        "tag_id": theirs["tag_id"],
        "run_id": theirs["run_id"],
        "kb_id": theirs["kb_id"],
        "session_id": theirs["session_id"],
        "source_id": theirs["source_id"],
    }
    item_ids = {"/api/pages": "page_id", "/api/files": "file_id", "/api/mail": "mail_id"}
    bodies: dict[tuple[str, str], Any] = {
        ("PATCH", "/api/pages/{page_id}"): {"title": "pwned"},
        ("PATCH", "/api/nodes/{node_id}"): {"text": "pwned"},
        ("POST", "/api/nodes/{node_id}/move"): {"parent_id": None},
        ("PATCH", "/api/files/{file_id}"): {"enabled": False},
        ("PUT", "/api/tags/{tag_id}/values/{target_kind}/{target_id}"): {"value": "x"},
        ("POST", "/api/tools/{name}"): {"arguments": {"page_id": str(theirs["page_id"])}},
        ("PUT", "/api/sources/{source_id}/password"): {"password": "pwned"},
    }
    checked = 0
    for method, path in api_operations(client):
        if "{" not in path:
            continue
        concrete = path
        for prefix, key in item_ids.items():
            if path.startswith(prefix + "/{item_id}"):
                concrete = concrete.replace("{item_id}", str(ids[key]))
        for key, value in ids.items():
            concrete = concrete.replace("{" + key + "}", str(value))
        concrete = concrete.replace("{name}", "kb.read")
        # Operator routes take any workspace's id, and an ordinary key may use none of them.
        concrete = concrete.replace("{workspace_id}", str(theirs["workspace_id"]))
        if "{target_kind}" in concrete:
            # Tag values and exclusions, aimed at their page.
            concrete = concrete.replace("{target_kind}", "page")
            concrete = concrete.replace("{target_id}", str(theirs["page_id"]))
        assert "{" not in concrete, f"no id for {path}"
        response = client.request(method, concrete, json=bodies.get((method, path)))
        expected = 403 if path.startswith("/api/admin/") else 404
        assert response.status_code == expected, (method, path, response.text)
        checked += 1
    assert checked >= 25
    # Creating things in their knowledge base, or as a child of their node, is refused too.
    assert (
        client.post("/api/pages", json={"title": "x", "kb_id": str(theirs["kb_id"])}).status_code
        == 404
    )
    refused = client.post(
        "/api/nodes",
        json={"page_id": str(mine.id), "text": "x", "parent_id": str(theirs["node_id"])},
    )
    assert refused.status_code == 404
    assert client.get("/api/pages", params={"kb_id": str(theirs["kb_id"])}).status_code == 404
    assert snapshot(database) == before


def test_lists_never_show_another_workspace(
    database: Database, cx: Context, client: TestClient
) -> None:
    other_workspace(database, cx)
    for path in ("/api/pages", "/api/files", "/api/mail", "/api/tags"):
        assert client.get(path).json() == [], path
    assert [k["name"] for k in client.get("/api/knowledge-bases").json()] == ["Default"]


def test_lists_by_another_workspaces_base_answer_404(
    database: Database, cx: Context, client: TestClient
) -> None:
    theirs = other_workspace(database, cx)
    for path in ("/api/pages", "/api/files", "/api/mail", "/api/tags"):
        response = client.get(path, params={"kb_id": str(theirs["kb_id"])})
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["message"] == (
            f"No knowledge base with id {theirs['kb_id']} in this workspace."
        )
    # Their key, listing their own base, sees their things.
    their_client = make_client(database, cx.settings, theirs["cx"].actor)
    for path in ("/api/pages", "/api/files", "/api/mail", "/api/tags"):
        listed = their_client.get(path, params={"kb_id": str(theirs["kb_id"])})
        assert listed.status_code == 200, path
        assert len(listed.json()) == 1, path


def test_the_same_message_id_may_exist_in_two_workspaces(database: Database, cx: Context) -> None:
    theirs = other_workspace(database, cx)
    mine = commands.add_mail(cx, message_id="<theirs@x>", subject="mine")
    assert mine.id != theirs["mail_id"]
