"""Exact contracts: every JSON body refuses a field it does not declare, naming it and the fields
that exist; a tool takes its arguments bare or wrapped; MCP's errors name MCP's own schema."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.agents import tools
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput
from subspace.keys import create_key
from subspace.models import Actor

UNKNOWN = "zz_not_a_field"


def json_body_operations(client: TestClient) -> list[tuple[str, str, list[str]]]:
    """(METHOD, path, declared fields) of every operation whose body is a JSON object model."""
    schema = client.get("/openapi.json").json()
    found = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            body = content.get("application/json", {}).get("schema")
            if not body or "$ref" not in body:
                continue
            model = schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
            found.append((method.upper(), path, sorted(model.get("properties", {}))))
    return found


def test_every_json_body_refuses_an_unknown_field_by_name(
    client: TestClient, database: Database, actor: Actor
) -> None:
    with database.pool.connection() as conn:
        _, token = create_key(conn, actor, "operator", admin=True)
    client.headers["authorization"] = f"Bearer {token}"  # the admin routes answer it alone
    operations = json_body_operations(client)
    assert len(operations) >= 12, operations  # the scan found the API's bodies
    for method, template, fields in operations:
        path = template
        for name in ("page_id", "node_id", "file_id", "mail_id", "tag_id", "workspace_id"):
            path = path.replace("{" + name + "}", str(uuid.uuid4()))
        path = path.replace("{target_kind}", "page").replace("{target_id}", str(uuid.uuid4()))
        answer = client.request(method, path, json={UNKNOWN: 1})
        sim = path.startswith("/api/v1/knowledge")
        assert answer.status_code == (400 if sim else 422), (method, path, answer.text)
        message = answer.json()["error"] if sim else answer.json()["error"]["message"]
        assert f"Unknown field '{UNKNOWN}'." in message, (method, path, message)
        for field in fields:
            assert field in message, (method, path, message)


def test_a_misspelt_search_field_is_refused_with_the_one_meant(client: TestClient) -> None:
    answer = client.post("/api/search", json={"q": "x"})
    assert answer.status_code == 422
    message = answer.json()["error"]["message"]
    assert message.startswith("Unknown field 'q'. Did you mean 'query'? The fields are: query,")
    nested = client.post("/api/search", json={"query": "x", "tags": [{"tg": "a", "value": 1}]})
    assert nested.status_code == 422
    assert nested.json()["error"]["message"].startswith(
        "In tags.0: Unknown field 'tg'. Did you mean 'tag'?"
    )
    sim = client.post("/api/v1/knowledge/search", json={"query": "x", "topk": 3})
    assert sim.status_code == 400
    assert set(sim.json()) == {"success", "error"}
    assert sim.json()["success"] is False
    assert sim.json()["error"].startswith("Unknown field 'topk'. Did you mean 'topK'?")


def test_a_tool_takes_its_arguments_bare_or_wrapped(client: TestClient, cx: Context) -> None:
    commands.create_page(cx, "Ferry to Ilha Verde")
    bare = client.post("/api/tools/kb.search", json={"query": "ferry", "limit": 2})
    wrapped = client.post("/api/tools/kb.search", json={"arguments": {"query": "ferry"}})
    assert bare.status_code == 200, bare.text
    assert wrapped.status_code == 200, wrapped.text
    assert "Ferry to Ilha Verde" in bare.json()["text"]
    assert bare.json()["text"] == wrapped.json()["text"]
    wrong = client.post("/api/tools/kb.search", json={"query": "ferry", "lmit": 2})
    assert wrong.status_code == 422
    message = wrong.json()["error"]["message"]
    assert "lmit: is not an argument of this tool" in message
    assert message.endswith("GET /api/tools gives each tool's input_schema.")


def test_tool_errors_name_the_schema_where_each_caller_finds_it(
    database: Database, cx: Context
) -> None:
    with pytest.raises(InvalidInput) as over_mcp:
        tools.call_tool(
            cx, database.searcher(None), "kb.search", {"qury": "x"}, tools.SCHEMA_AT_MCP
        )
    assert over_mcp.value.message.endswith("tools/list gives each tool's inputSchema.")
    assert "/api/" not in over_mcp.value.message
    with pytest.raises(InvalidInput) as from_a_model:
        tools.call_tool(cx, database.searcher(None), "kb.search", {"qury": "x"})
    assert "/api/" not in from_a_model.value.message


def test_a_body_not_sent_as_json_says_which_header_to_send(client: TestClient) -> None:
    form = client.post(
        "/api/search",
        content=b'{"query": "x"}',
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 422
    message = form.json()["error"]["message"]
    assert "sent as application/x-www-form-urlencoded, not JSON" in message
    assert "Content-Type: application/json" in message
    sim = client.post("/api/v1/knowledge/search", content=b"{}", headers={"content-type": ""})
    assert sim.status_code == 400
    assert "has no Content-Type" in sim.json()["error"]


def test_tool_arguments_mixed_or_not_an_object_are_refused_clearly(client: TestClient) -> None:
    mixed = client.post(
        "/api/tools/kb.search", json={"arguments": {"query": "x"}, "query": "x"}
    ).json()["error"]["message"]
    assert "either bare or wrapped in `arguments`, not both" in mixed
    for wrong in ("query", [1], None):
        answer = client.post("/api/tools/kb.search", json={"arguments": wrong})
        assert answer.status_code == 422
        assert "arguments must be a JSON object" in answer.json()["error"]["message"]
    typo = client.post("/api/tools/kb.search", json={"qurey": "x"}).json()["error"]["message"]
    assert "qurey: is not an argument of this tool (did you mean 'query'?)" in typo
    assert "its arguments are: query," in typo


def test_a_huge_unknown_name_is_cut_in_the_message(client: TestClient) -> None:
    answer = client.post("/api/search", json={"a" * 100_000: 1})
    assert answer.status_code == 422
    assert len(answer.content) < 2_000
    assert answer.json()["error"]["message"].startswith("Unknown field '" + "a" * 60 + "…'.")
