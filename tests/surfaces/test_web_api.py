"""The routes the web app's file, mail and tag views read: chunks, attachments, tag values."""

from __future__ import annotations

from fastapi.testclient import TestClient

from subspace.config import Settings
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from tests.samples import make_email, make_mbox


def test_a_files_chunks_are_its_extracted_text_in_order(
    client: TestClient, database: Database, settings: Settings
) -> None:
    paragraphs = [f"Paragraph {i} about harbour cranes. " + "word " * 150 for i in range(12)]
    text = "\n\n".join(paragraphs)
    file = client.post("/api/files", files={"file": ("cranes.txt", text.encode())}).json()
    assert client.get(f"/api/files/{file['id']}/chunks").json() == []  # not extracted yet
    extract_pending(database, settings)
    chunks = client.get(f"/api/files/{file['id']}/chunks").json()
    assert len(chunks) > 1
    assert [c["n"] for c in chunks] == list(range(len(chunks)))
    assert all(c["enabled"] for c in chunks)
    assert chunks[0]["text"].startswith("Paragraph 0 about harbour cranes.")
    assert "Paragraph 11" in chunks[-1]["text"]
    assert " ".join(c["text"] for c in chunks).split() == text.split()


def test_a_messages_attachments_are_listed_and_deleted_ones_left_out(client: TestClient) -> None:
    with_file = make_email(
        "Plan",
        "See attached.",
        message_id="<plan@x>",
        attachments=[("plan.txt", "text/plain", b"the plan"), ("notes.txt", "text/plain", b"n")],
    )
    bare = make_email("Lunch", "Noon.", message_id="<lunch@x>")
    client.post("/api/mail/import", files={"file": ("in.mbox", make_mbox([with_file, bare]))})
    mail = {m["subject"]: m["id"] for m in client.get("/api/mail").json()}
    attached = client.get(f"/api/mail/{mail['Plan']}/attachments").json()
    assert [f["name"] for f in attached] == ["notes.txt", "plan.txt"]
    assert all(f["mail_id"] == mail["Plan"] for f in attached)
    assert client.get(f"/api/mail/{mail['Lunch']}/attachments").json() == []
    client.delete(f"/api/files/{attached[0]['id']}")
    assert [f["name"] for f in client.get(f"/api/mail/{mail['Plan']}/attachments").json()] == [
        "plan.txt"
    ]


def test_tag_values_of_an_item_come_typed_and_go_when_cleared(client: TestClient) -> None:
    file = client.post("/api/files", files={"file": ("a.txt", b"alpha")}).json()
    other = client.post("/api/files", files={"file": ("b.txt", b"beta")}).json()
    tags = {
        kind: client.post("/api/tags", json={"name": f"t-{kind}", "type": kind}).json()["id"]
        for kind in ("text", "number", "date", "boolean")
    }
    values = {"text": "Ana", "number": 3.5, "date": "2026-11-02", "boolean": False}
    for kind, value in values.items():
        put = client.put(f"/api/tags/{tags[kind]}/values/file/{file['id']}", json={"value": value})
        assert put.status_code == 200, put.text
    got = client.get(f"/api/tags/values/file/{file['id']}").json()
    assert [(v["name"], v["type"], v["value"]) for v in got] == [
        ("t-boolean", "boolean", False),
        ("t-date", "date", "2026-11-02"),
        ("t-number", "number", 3.5),
        ("t-text", "text", "Ana"),
    ]
    assert got[0]["tag_id"] == tags["boolean"]
    assert client.get(f"/api/tags/values/file/{other['id']}").json() == []
    client.delete(f"/api/tags/{tags['text']}/values/file/{file['id']}")
    names = [v["name"] for v in client.get(f"/api/tags/values/file/{file['id']}").json()]
    assert names == ["t-boolean", "t-date", "t-number"]


def test_tag_values_of_a_missing_item_are_a_404(client: TestClient) -> None:
    missing = "00000000-0000-0000-0000-000000000000"
    response = client.get(f"/api/tags/values/page/{missing}")
    assert response.status_code == 404
    assert client.get(f"/api/tags/values/shelf/{missing}").status_code == 422
    assert client.get(f"/api/files/{missing}/chunks").status_code == 404
    assert client.get(f"/api/mail/{missing}/attachments").status_code == 404
