"""Workspaces an operator can manage: from the CLI, and over /api/admin with an admin key."""

from __future__ import annotations

import json

from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.cli import main
from subspace.context import Context
from subspace.database import Database
from subspace.keys import create_key
from subspace.workspaces import create_workspace
from tests.conftest import api_operations


def admin_client(database: Database, cx: Context, client: TestClient) -> TestClient:
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "operator", admin=True)
    return TestClient(client.app, headers={"authorization": f"Bearer {token}"})


def test_workspaces_create_and_list_on_the_command_line(runner: CliRunner, cx: Context) -> None:
    commands.create_page(cx, "In the default workspace")
    created = runner.invoke(main, ["workspaces", "create", "Acme"])
    assert created.exit_code == 0, created.output
    acme_id = created.stdout.strip()
    listed = json.loads(runner.invoke(main, ["workspaces", "list", "--json"]).stdout)
    assert [(w["name"], w["pages"], w["knowledge_bases"]) for w in listed] == [
        ("Default", 1, 1),
        ("Acme", 0, 1),
    ]
    assert listed[1]["id"] == acme_id
    table = runner.invoke(main, ["workspaces", "list"])
    assert acme_id in table.stdout
    assert "Acme" in table.stdout
    again = runner.invoke(main, ["workspaces", "create", "acme"])
    assert again.exit_code == 1
    assert "A workspace named 'acme' already exists" in again.output
    empty = runner.invoke(main, ["workspaces", "create", "  "])
    assert empty.exit_code == 1
    assert "must not be empty" in empty.output


def test_keys_for_another_workspace_act_in_it_only(
    runner: CliRunner, database: Database, cx: Context, client: TestClient
) -> None:
    commands.create_page(cx, "Default's page")
    acme_id = runner.invoke(main, ["workspaces", "create", "Acme"]).stdout.strip()
    by_name = runner.invoke(main, ["keys", "create", "--workspace", "ACME", "--name", "ci"])
    assert by_name.exit_code == 0, by_name.output
    assert acme_id in by_name.stderr
    token = by_name.stdout.strip()
    acme = TestClient(client.app, headers={"authorization": f"Bearer {token}"})
    assert acme.get("/api/pages").json() == []
    assert acme.post("/api/pages", json={"title": "Acme plan"}).status_code == 201
    assert [p["title"] for p in client.get("/api/pages").json()] == ["Default's page"]
    by_id = runner.invoke(main, ["keys", "create", "--workspace", acme_id])
    assert by_id.exit_code == 0, by_id.output
    keys = json.loads(
        runner.invoke(main, ["keys", "list", "--workspace", acme_id, "--json"]).stdout
    )
    assert [k["name"] for k in keys] == ["ci", ""]
    default_keys = json.loads(runner.invoke(main, ["keys", "list", "--json"]).stdout)
    assert "ci" not in [k["name"] for k in default_keys]
    unknown = runner.invoke(main, ["keys", "create", "--workspace", "Nope"])
    assert unknown.exit_code == 1
    assert "No workspace is named 'Nope'" in unknown.output
    assert "subspace workspaces list" in unknown.output


def test_kb_list_shows_bases_ids_and_counts(runner: CliRunner, cx: Context) -> None:
    notes = commands.create_knowledge_base(cx, "Notes")
    commands.create_page(cx, "One")
    deleted = commands.create_page(cx, "Gone", kb_id=notes.id)
    commands.delete_page(cx, deleted.id)
    commands.create_page(cx, "Two", kb_id=notes.id)
    commands.add_mail(cx, message_id="<m@x>", subject="hello", kb_id=notes.id)
    listed = json.loads(runner.invoke(main, ["kb", "list", "--json"]).stdout)
    assert [(b["name"], b["is_default"], b["pages"], b["files"], b["mail"]) for b in listed] == [
        ("Default", True, 1, 0, 0),
        ("Notes", False, 1, 0, 1),
    ]
    assert listed[1]["id"] == str(notes.id)
    table = runner.invoke(main, ["kb", "list"])
    assert table.exit_code == 0, table.output
    assert str(notes.id) in table.stdout


def test_an_admin_key_manages_workspaces_over_the_api(
    database: Database, cx: Context, client: TestClient
) -> None:
    admin = admin_client(database, cx, client)
    created = admin.post("/api/admin/workspaces", json={"name": "Acme"})
    assert created.status_code == 201, created.text
    acme = created.json()
    assert (acme["name"], acme["knowledge_bases"], acme["keys"]) == ("Acme", 1, 0)
    listed = admin.get("/api/admin/workspaces").json()
    assert [w["name"] for w in listed] == ["Default", "Acme"]
    made = admin.post(f"/api/admin/workspaces/{acme['id']}/keys", json={"name": "ci"})
    assert made.status_code == 201, made.text
    assert made.json()["key"]["name"] == "ci"
    assert made.json()["key"]["admin"] is False
    theirs = TestClient(client.app, headers={"authorization": f"Bearer {made.json()['token']}"})
    assert theirs.post("/api/pages", json={"title": "Acme plan"}).status_code == 201
    assert client.get("/api/pages").json() == []
    assert admin.get("/api/admin/workspaces").json()[1]["pages"] == 1
    # The new workspace's key is an ordinary one: no operator routes.
    refused = theirs.get("/api/admin/workspaces")
    assert refused.status_code == 403
    assert "subspace keys create --admin" in refused.json()["error"]["message"]
    taken = admin.post("/api/admin/workspaces", json={"name": "ACME"})
    assert taken.status_code == 409
    assert "already exists" in taken.json()["error"]["message"]
    assert admin.post("/api/admin/workspaces", json={"name": ""}).status_code == 422
    missing = admin.post("/api/admin/workspaces/00000000-0000-0000-0000-000000000001/keys", json={})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == (
        "No workspace with id 00000000-0000-0000-0000-000000000001 on this server."
    )


def test_an_ordinary_key_gets_403_on_every_operator_route(
    database: Database, cx: Context, client: TestClient
) -> None:
    with database.pool.connection() as conn:
        other = create_workspace(conn, "Other")
    admin_routes = [(m, p) for m, p in api_operations(client) if p.startswith("/api/admin/")]
    assert len(admin_routes) == 3
    for method, path in admin_routes:
        concrete = path.replace("{workspace_id}", str(other.workspace_id))
        response = client.request(method, concrete, json={"name": "Sneaky"})
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    with database.pool.connection() as conn:
        names = [r["name"] for r in conn.execute("select name from kb.workspaces").fetchall()]
        keys = conn.execute(
            "select count(*) as n from kb.api_keys where workspace_id = %s", (other.workspace_id,)
        ).fetchone()
    assert sorted(names) == ["Default", "Other"]
    assert keys == {"n": 0}


def test_keys_create_admin_makes_an_operator_key(
    runner: CliRunner, database: Database, client: TestClient
) -> None:
    created = runner.invoke(main, ["keys", "create", "--admin", "--name", "ops"])
    assert created.exit_code == 0, created.output
    assert "admin key" in created.stderr
    operator = TestClient(client.app, headers={"authorization": f"Bearer {created.stdout.strip()}"})
    assert operator.get("/api/admin/workspaces").status_code == 200
    assert operator.get("/api/pages").status_code == 200
    listed = json.loads(runner.invoke(main, ["keys", "list", "--json"]).stdout)
    assert [(k["name"], k["admin"]) for k in listed if k["name"] == "ops"] == [("ops", True)]
