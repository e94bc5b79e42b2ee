"""Bad input gets a clear 4xx, is cleaned before it reaches the driver, and loses nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import TooLarge
from subspace.models import Actor
from tests.conftest import make_client

RAW_JSON = {"content-type": "application/json"}


def test_nul_and_lone_surrogates_are_cleaned_everywhere(client: TestClient) -> None:
    # \u0000 and a lone surrogate are valid JSON escapes but not storable text.
    page = client.post("/api/pages", content=b'{"title": "a\\u0000b\\ud800c"}', headers=RAW_JSON)
    assert page.status_code == 201, page.text
    assert page.json()["title"] == "ab\ufffdc"
    node = client.post(
        "/api/nodes",
        content=b'{"page_id": "%s", "text": "x\\u0000y\\udfff", "props": {"k\\u0000": "v\\u0000"}}'
        % page.json()["id"].encode(),
        headers=RAW_JSON,
    )
    assert node.status_code == 201, node.text
    assert node.json()["text"] == "xy\ufffd"
    assert node.json()["props"] == {"k": "v"}
    mail = client.post(
        "/api/mail",
        content=b'{"message_id": "<m\\u0000@x>", "subject": "s\\ud83d", "body_text": "b\\u0000"}',
        headers=RAW_JSON,
    )
    assert mail.status_code == 201, mail.text
    assert (mail.json()["message_id"], mail.json()["subject"]) == ("<m@x>", "s\ufffd")
    upload = client.post("/api/files", files={"file": ("na\x00me.txt", b"data", "text/plain")})
    assert upload.status_code == 201, upload.text
    assert "\x00" not in upload.json()["name"]


def test_invalid_utf8_in_a_json_body_is_a_400_that_says_so(client: TestClient) -> None:
    response = client.post("/api/pages", content=b'{"title": "caf\xe9"}', headers=RAW_JSON)
    assert response.status_code == 400
    assert "UTF-8" in response.json()["error"]["message"]
    assert client.get("/api/pages").json() == []


def test_invalid_utf8_in_a_file_name_is_cleaned(client: TestClient) -> None:
    body = (
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="r\xe9sum\xe9.txt"\r\n'
        b"Content-Type: text/plain\r\n\r\nhello\r\n--b--\r\n"
    )
    response = client.post(
        "/api/files", content=body, headers={"content-type": "multipart/form-data; boundary=b"}
    )
    assert response.status_code == 201, response.text
    assert response.json()["name"].endswith(".txt")


def test_a_5_mb_bullet_is_refused_and_the_page_is_kept(client: TestClient, cx: Context) -> None:
    page = client.post("/api/pages", json={"title": "Keep me"}).json()
    client.post("/api/nodes", json={"page_id": page["id"], "text": "first"})
    huge = "word " * 1_000_000
    response = client.post("/api/nodes", json={"page_id": page["id"], "text": huge})
    assert response.status_code == 413
    assert "SUBSPACE_MAX_REQUEST_BYTES" in response.json()["error"]["message"]
    with pytest.raises(TooLarge, match="SUBSPACE_MAX_NODE_CHARS"):
        commands.add_node(cx, page["id"], huge)
    tree = client.get(f"/api/pages/{page['id']}").json()
    assert [n["text"] for n in tree["nodes"]] == ["first"]


def test_a_bullet_at_the_limit_is_stored_and_indexed(cx: Context) -> None:
    """The tsvector input is capped, so even the longest allowed bullet never fails to index."""
    big = replace(cx, settings=replace(cx.settings, max_node_chars=5_000_000))
    page = commands.create_page(big, "Big")
    # Distinct words maximise the tsvector's size: uncapped, this fails in Postgres.
    text = " ".join(f"w{i}x" for i in range(500_000))
    node = commands.add_node(big, page.id, text)
    with cx.transaction() as conn:
        row = conn.execute(
            "select length(text) as n, text_tsv @@ to_tsquery('english', 'w10x') as hit "
            "from kb.nodes where id = %s",
            (node.id,),
        ).fetchone()
    assert row == {"n": len(text), "hit": True}


def test_a_long_title_is_refused_with_the_setting_name(client: TestClient) -> None:
    response = client.post("/api/pages", json={"title": "t" * 1001})
    assert response.status_code == 413
    assert "SUBSPACE_MAX_TITLE_CHARS" in response.json()["error"]["message"]


def test_an_empty_upload_is_refused(client: TestClient) -> None:
    response = client.post("/api/files", files={"file": ("empty.txt", b"", "text/plain")})
    assert response.status_code == 422
    assert "empty" in response.json()["error"]["message"]
    assert client.get("/api/files").json() == []


def test_an_oversized_upload_is_refused_early(
    database: Database, settings: Settings, actor: Actor
) -> None:
    small = replace(settings, max_upload_bytes=1_000)
    client = make_client(database, small, actor)
    accepted = client.post("/api/files", files={"file": ("ok.bin", b"x" * 900)})
    assert accepted.status_code == 201
    # Over the limit plus the multipart allowance: refused from Content-Length alone.
    response = client.post("/api/files", files={"file": ("big.bin", b"x" * 200_000)})
    assert response.status_code == 413
    assert "SUBSPACE_MAX_UPLOAD_BYTES" in response.json()["error"]["message"]
    # Over the limit but within the allowance: refused after reading just past the limit.
    response = client.post("/api/files", files={"file": ("big.bin", b"x" * 5_000)})
    assert response.status_code == 413
    assert [f["name"] for f in client.get("/api/files").json()] == ["ok.bin"]


def test_a_streamed_body_without_length_is_cut_off(
    database: Database, settings: Settings, actor: Actor
) -> None:
    client = make_client(database, replace(settings, max_request_bytes=100), actor)

    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"title": "'
        for _ in range(100):
            yield b"x" * 10
        yield b'"}'

    response = client.post("/api/pages", content=chunks(), headers=RAW_JSON)
    assert response.status_code == 413
    assert client.get("/api/pages").json() == []


def test_duplicate_mail_is_a_409_and_the_first_stays(client: TestClient) -> None:
    first = client.post("/api/mail", json={"message_id": "<dup@x>", "subject": "first"})
    second = client.post("/api/mail", json={"message_id": "<dup@x>", "subject": "second"})
    assert (first.status_code, second.status_code) == (201, 409)
    assert "dup@x" in second.json()["error"]["message"]
    assert [m["subject"] for m in client.get("/api/mail").json()] == ["first"]


def test_moving_a_node_under_its_descendant_is_a_409(client: TestClient) -> None:
    page = client.post("/api/pages", json={"title": "T"}).json()
    a = client.post("/api/nodes", json={"page_id": page["id"], "text": "a"}).json()
    b = client.post(
        "/api/nodes", json={"page_id": page["id"], "text": "b", "parent_id": a["id"]}
    ).json()
    response = client.post(f"/api/nodes/{a['id']}/move", json={"parent_id": b["id"]})
    assert response.status_code == 409
    assert "descendants" in response.json()["error"]["message"]
    tree = client.get(f"/api/pages/{page['id']}").json()
    assert tree["nodes"][0]["children"][0]["id"] == b["id"]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/api/pages", {"title": 5}, 422),
        ("/api/nodes", {"page_id": "not-a-uuid", "text": "x"}, 422),
        ("/api/tags", {"name": "x", "type": "color"}, 422),
        ("/api/knowledge-bases", {"name": "   "}, 422),
        ("/api/mail", {"message_id": ""}, 422),
    ],
)
def test_malformed_fields_are_422(client: TestClient, path: str, body: object, status: int) -> None:
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"]


def test_a_body_that_cannot_be_parsed_answers_the_declared_400(client: TestClient) -> None:
    garbled = client.post("/api/pages", content=b'{"title": "\xff"}', headers=RAW_JSON)
    assert garbled.status_code == 400, garbled.text
    assert garbled.json()["error"]["code"] == "unparsable_body"
    # Every operation that takes a body may answer so, and says so in the schema.
    schema = client.get("/openapi.json").json()
    bodies = [
        (method, path)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]
    assert len(bodies) >= 15
    for method, path in bodies:
        assert "400" in schema["paths"][path][method]["responses"], (method, path)
