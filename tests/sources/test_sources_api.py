"""/api/sources and `subspace sources`: adding, listing, syncing and removing; the limits a
client meets; and a search row that names the source its item came from."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace.cli import main
from subspace.config import Settings
from subspace.database import Database
from subspace.models import Actor
from subspace.sources.runner import SourceSync
from tests import imap_server
from tests.conftest import make_client
from tests.imap_server import Dovecot, message


@pytest.fixture
def rooted(keyed: Settings, tmp_path: Path) -> Settings:
    return dataclasses.replace(keyed, folder_roots=str(tmp_path / "allowed"))


@pytest.fixture
def api(database: Database, rooted: Settings, actor: Actor) -> TestClient:
    return make_client(database, rooted, actor)


def notes_folder(tmp_path: Path) -> Path:
    notes = tmp_path / "allowed" / "notes"
    notes.mkdir(parents=True)
    (notes / "harbour.md").write_text("# Harbour\n\n- the quay is mended on Tuesdays\n")
    return notes


def test_a_folder_added_over_the_api_is_listed_synced_and_named_in_search_rows(
    api: TestClient, database: Database, rooted: Settings, actor: Actor, tmp_path: Path
) -> None:
    notes = notes_folder(tmp_path)
    added = api.post("/api/sources", json={"kind": "folder", "name": "Notes", "path": str(notes)})
    assert added.status_code == 201, added.text
    source = added.json()
    assert (source["status"], source["config"]["path"]) == ("waiting", str(notes))
    assert [s["name"] for s in api.get("/api/sources").json()] == ["Notes"]
    assert api.post(f"/api/sources/{source['id']}/sync").status_code == 202

    SourceSync(database, rooted, actor.workspace_id, source["id"]).round(wait=True)
    detail = api.get(f"/api/sources/{source['id']}").json()
    assert detail["status"] == "ok" and detail["last_counts"]["added"] == 1
    assert detail["errors"] == []
    rows = api.get("/api/search", params={"q": "quay mended", "mode": "lexical"}).json()["rows"]
    assert rows and rows[0]["source"] == "Notes"

    removed = api.delete(f"/api/sources/{source['id']}")
    assert removed.status_code == 200 and api.get("/api/sources").json() == []
    rows = api.get("/api/search", params={"q": "quay mended", "mode": "lexical"}).json()["rows"]
    assert rows and rows[0]["source"] is None  # the page stays; where it came from is forgotten


IMAP = {"kind": "imap", "name": "m", "host": "imap.example.org", "user": "me", "password": "p"}


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"kind": "folder", "name": "x", "path": "/etc"}, 403, "not under SUBSPACE_FOLDER_ROOTS"),
        ({"kind": "folder", "name": "x", "path": "notes"}, 422, "relative"),
        ({"kind": "folder", "name": "x", "path": "/x", "include": ["*"] * 51}, 422, "51"),
        ({"kind": "ftp", "name": "x"}, 422, "kind"),
        ({**IMAP, "tls": "none"}, 422, "only over TLS"),
        ({**IMAP, "password": ""}, 422, "password"),
        ({**IMAP, "port": 70000}, 422, "port"),
        ({**IMAP, "folders": ["f"] * 21}, 422, "folders"),
        ({**IMAP, "host": "two words"}, 422, "host name"),
        ({"kind": "folder", "name": "a\u0000b", "path": "/x"}, 422, "U+0000"),
        ({"kind": "folder", "name": "x", "path": "/x", "include": ["\ud800"]}, 422, "U+D800"),
        ({**IMAP, "folders": ["INBOX", "\udfff"]}, 422, "U+DFFF"),
        ({**IMAP, "user": "me\u0000"}, 422, "U+0000"),
        ({**IMAP, "port": True}, 422, "port"),
        ({**IMAP, "name": "00000000-0000-0000-0000-000000000007"}, 422, "cannot be an id"),
    ],
)
def test_bad_sources_are_refused_with_what_to_fix(
    api: TestClient, body: dict[str, object], status: int, says: str
) -> None:
    # As JSON text with its escapes (\ud800 too), as any client may send it.
    text = json.dumps(body)
    answer = api.post("/api/sources", content=text, headers={"content-type": "application/json"})
    assert answer.status_code == status, answer.text
    assert says in json.dumps(answer.json())


def test_a_mailbox_password_is_never_read_back_and_needs_the_key(
    database: Database, rooted: Settings, actor: Actor, api: TestClient
) -> None:
    body = {"kind": "imap", "name": "m", "host": "127.0.0.1", "tls": "none", "user": "me",
            "password": "hunter2-secret", "port": 1}  # fmt: skip
    added = api.post("/api/sources", json=body)
    assert added.status_code == 201 and added.json()["has_password"] is True
    for answer in (added, api.get("/api/sources"), api.get(f"/api/sources/{added.json()['id']}")):
        assert "hunter2" not in answer.text
    unkeyed = make_client(database, dataclasses.replace(rooted, sources_key=""), actor)
    refused = unkeyed.post("/api/sources", json={**body, "name": "n"})
    assert refused.status_code == 422 and "SUBSPACE_SOURCES_KEY is not set" in refused.text
    assert api.get("/api/sources/00000000-0000-0000-0000-000000000000").status_code == 404


def test_the_command_line_adds_syncs_shows_and_removes(runner: CliRunner, tmp_path: Path) -> None:
    notes = notes_folder(tmp_path)
    (notes / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    added = runner.invoke(main, ["sources", "add", "folder", str(notes), "--name", "Notes"])
    assert added.exit_code == 0, added.output
    synced = runner.invoke(main, ["sources", "sync", "Notes", "--json"])
    assert synced.exit_code == 0, synced.output
    counts = json.loads(synced.stdout)
    assert counts["added"] == 2 and counts["files"] == 2
    listed = runner.invoke(main, ["sources", "list", "--json"])
    assert json.loads(listed.stdout)[0]["status"] == "ok"
    shown = runner.invoke(main, ["sources", "show", "Notes", "--json"])
    errors = json.loads(shown.stdout)["errors"]
    assert [error["item"] for error in errors] == ["notes/broken.pdf"]  # its text unreadable
    removed = runner.invoke(main, ["sources", "remove", "Notes"])
    assert removed.exit_code == 0 and "stay" in removed.output
    missing = runner.invoke(main, ["sources", "sync", "Notes"])
    assert missing.exit_code == 1 and "No source named 'Notes'" in missing.output


def test_the_command_line_adds_a_mailbox_with_its_password_on_stdin(
    runner: CliRunner, keyed: Settings, dovecot: Dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    dovecot.deliver("INBOX", [message(1), message(2)])
    server = ["127.0.0.1", "--port", str(dovecot.port), "--tls", "none"]
    command = ["sources", "add", "imap", *server, "--user", imap_server.USER, "--name", "mail",
               "--password-stdin"]  # fmt: skip
    unkeyed = runner.invoke(main, command, input=imap_server.PASSWORD + "\n")
    assert unkeyed.exit_code == 1 and "SUBSPACE_SOURCES_KEY is not set" in unkeyed.output
    monkeypatch.setenv("SUBSPACE_SOURCES_KEY", keyed.sources_key)
    added = runner.invoke(main, command, input=imap_server.PASSWORD + "\n")
    assert added.exit_code == 0, added.output
    synced = runner.invoke(main, ["sources", "sync", "mail", "--json"])
    assert synced.exit_code == 0, synced.output
    assert json.loads(synced.stdout)["added"] == 2
    wrong = runner.invoke(main, ["sources", "password", "mail", "--password-stdin"], input="no\n")
    assert wrong.exit_code == 0
    refused = runner.invoke(main, ["sources", "sync", "mail"])
    assert refused.exit_code == 1 and "refused the user name or password" in refused.output


def test_a_bad_mailbox_on_the_command_line_is_one_line_not_a_traceback(
    runner: CliRunner,
) -> None:
    for extra in (["--tls", "none"], ["--port", "70000"], ["--port", "0"]):
        command = ["sources", "add", "imap", "imap.example.org", "--user", "me", *extra,
                   "--password-stdin"]  # fmt: skip
        refused = runner.invoke(main, command, input="secret\n")
        assert refused.exit_code == 1 and "Traceback" not in refused.output
        assert refused.output.startswith("Error: "), refused.output
