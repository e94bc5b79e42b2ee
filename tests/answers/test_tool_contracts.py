"""The agent tools' contracts: their schemas, their refusals, refs that lead from search to
read, and every surface listing exactly the declared search options."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import click
import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.agents.tools import TOOLS, call_tool
from subspace.cli import main
from subspace.config import SETTINGS, Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput, NotFound
from subspace.ingest.worker import extract_pending
from subspace.models import Actor
from subspace.providers.fake import FakeProvider
from subspace.search import filters, options
from tests.conftest import make_client
from tests.search_helpers import index

REF_AT_END = re.compile(r"\(((?:page|node|mem|file|mail):[0-9a-f-]{36}(?::\d+)?)\)$")


def tool(client: TestClient, name: str, **arguments: object) -> tuple[int, str]:
    answer = client.post(f"/api/tools/{name}", json={"arguments": arguments})
    body = answer.json()
    return answer.status_code, body.get("text") or body["error"]["message"]


def test_each_tool_lists_its_schema_and_needs_no_approval(client: TestClient) -> None:
    listed = {t["name"]: t for t in client.get("/api/tools").json()}
    assert list(listed) == ["kb.search", "kb.grep", "kb.read", "kb.node.read"]
    for entry in listed.values():
        assert entry["read_only"] is True
        assert entry["needs_approval"] is False
        assert len(entry["description"]) > 60  # written for a model, not a label
        assert entry["input_schema"]["type"] == "object"
        assert entry["input_schema"]["additionalProperties"] is False
    search = listed["kb.search"]["input_schema"]["properties"]
    assert search["query"]["type"] == "string"
    assert search["kinds"]["anyOf"][0] == {
        "type": "array",
        "items": {"type": "string", "enum": ["page", "node", "memory", "file", "mail"]},
    }
    assert (search["limit"]["type"], search["limit"]["minimum"], search["limit"]["default"]) == (
        "integer", 1, 10,
    )  # fmt: skip
    grep = listed["kb.grep"]["input_schema"]
    assert grep["properties"]["cursor"]["type"] == ["string", "null"]
    assert grep["properties"]["pattern"]["type"] == "string"
    assert grep["properties"]["regex"] == {**grep["properties"]["regex"], "type": "boolean"}
    assert (grep["properties"]["limit"]["minimum"], grep["properties"]["limit"]["maximum"]) == (
        1, 500,
    )  # fmt: skip
    for name in ("kb.read", "kb.node.read"):
        schema = listed[name]["input_schema"]
        assert schema["required"] == ["ref"]
        assert list(schema["properties"]) == ["ref"]


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("kb.search", {"query": 5}, "query"),
        ("kb.search", {"query": "x", "kinds": "file"}, "kinds"),
        ("kb.search", {"query": "x", "kinds": ["file", "blog"]}, "kinds.1"),
        ("kb.search", {"query": "x", "kinds": [None]}, "kinds.0"),
        ("kb.search", {"query": "x", "limit": "5"}, "limit"),
        ("kb.search", {"query": "x", "limit": 2.5}, "limit"),
        ("kb.search", {"query": "x", "limit": True}, "limit"),
        ("kb.search", {"query": "x", "limit": 0}, "limit"),
        ("kb.search", {"query": "x", "mode": "lexical"}, "mode"),
        ("kb.grep", {"pattern": ["x"]}, "pattern"),
        ("kb.grep", {"pattern": "x", "regex": "false"}, "regex"),
        ("kb.grep", {"pattern": "x", "regex": 0}, "regex"),
        ("kb.grep", {"pattern": "x", "limit": 501}, "limit"),
        ("kb.read", {}, "ref"),
        ("kb.read", {"ref": 5}, "ref"),
        ("kb.read", {"ref": "the runbook"}, "ref"),
        ("kb.node.read", {"ref": None}, "ref"),
        ("kb.node.read", {"ref": "page:6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27"}, "ref"),
    ],
)
def test_a_bad_argument_answers_422_naming_the_field(
    client: TestClient, name: str, arguments: dict[str, Any], field: str
) -> None:
    status, message = tool(client, name, **arguments)
    assert status == 422, (arguments, message)
    assert f"{field}:" in message, message
    assert message.endswith("."), message


def test_call_tool_refuses_what_is_not_a_tool_or_not_an_object(
    database: Database, cx: Context
) -> None:
    with pytest.raises(NotFound, match=r"The tools are kb\.search, kb\.grep, kb\.read and"):
        call_tool(cx, database.searcher(FakeProvider()), "kb.write", {})
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        call_tool(cx, database.searcher(FakeProvider()), "kb.search", ["x"])  # type: ignore[arg-type]


def test_every_ref_kb_search_prints_reads_back(
    database: Database, cx: Context, client: TestClient
) -> None:
    page = commands.create_page(cx, "Kiln log")
    firing = commands.add_node(cx, page.id, "Cone 6 glaze firing went well")
    commands.add_node(cx, page.id, "Cooled for a day", parent_id=firing.id)
    commands.upload_file(cx, "kiln.txt", b"Cone 6 glaze schedule: ramp 150 per hour\n")
    commands.add_mail(cx, message_id="<k@x>", subject="Glaze order", body_text="cone 6 glaze")
    extract_pending(database, cx.settings)
    index(database, cx)
    status, text = tool(client, "kb.search", query="cone glaze", limit=20)
    assert status == 200, text
    refs = [REF_AT_END.search(line) for line in text.splitlines()]
    found: dict[str, str] = {}
    for match in refs:
        if match is not None:
            found.setdefault(match.group(1).split(":")[0], match.group(1))  # the best of each
    assert {"node", "file", "mail"} <= set(found), text
    status, node = tool(client, "kb.read", ref=found["node"])
    assert status == 200
    assert node.splitlines()[1:] == [
        f"- Cone 6 glaze firing went well (node:{firing.id})",
        f"  - Cooled for a day (node:{node.split('(node:')[2][:36]})",
    ], node
    assert tool(client, "kb.node.read", ref=found["node"]) == (200, node)
    status, file_text = tool(client, "kb.read", ref=found["file"])
    assert status == 200
    assert "ramp 150 per hour" in file_text
    assert found["file"] in file_text
    status, mail = tool(client, "kb.read", ref=found["mail"])
    assert status == 200
    assert mail.startswith(f"# Glaze order ({found['mail']})")
    status, outline = tool(client, "kb.read", ref=f"page:{page.id}")
    assert status == 200
    assert outline.startswith(f"# Kiln log (page:{page.id})")
    assert tool(client, "kb.read", page_id=str(page.id)) == (200, outline)  # the old name


def _choices(command: click.Command, option: str) -> list[str]:
    param = next(p for p in command.params if p.name == option)
    assert isinstance(param.type, click.Choice)
    return [str(c) for c in param.type.choices]


def test_every_surface_lists_exactly_the_declared_options(client: TestClient) -> None:
    search_command = main.commands["search"]
    assert _choices(search_command, "kinds") == [*options.KINDS, *options.KIND_ALIASES]
    assert _choices(search_command, "mode") == list(options.MODES)
    assert _choices(search_command, "ranker") == list(options.RANKERS)
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert schemas["SearchRequest"]["properties"]["mode"]["enum"] == list(options.MODES)
    ranker = schemas["SearchRequest"]["properties"]["ranker"]["anyOf"][0]
    assert ranker["enum"] == list(options.RANKERS)
    assert schemas["TagFilter"]["properties"]["op"]["enum"] == list(options.TAG_OPS)
    search_tool = next(t for t in TOOLS if t.name == "kb.search").input_schema()
    assert search_tool["properties"]["kinds"]["anyOf"][0]["items"]["enum"] == list(options.KINDS)
    assert filters.KINDS is options.KINDS
    assert filters.OPS_BY_TYPE is options.OPS_BY_TYPE
    ranker_setting = next(s for s in SETTINGS if s.env == "SUBSPACE_LEXICAL_RANKER")
    assert ranker_setting.choices == options.RANKERS
    defaults = client.get("/openapi.json").json()["paths"]["/api/grep"]["get"]["parameters"]
    limit = next(p for p in defaults if p["name"] == "limit")
    assert limit["schema"]["default"] == options.DEFAULT_GREP_LIMIT
    assert set(options.TAG_OPS) == {op for ops in options.OPS_BY_TYPE.values() for op in ops}


def test_kb_search_limit_stops_at_the_setting_and_says_so(
    database: Database, settings: Settings, actor: Actor
) -> None:
    client = make_client(database, replace(settings, max_search_limit=25), actor)
    listed = {t["name"]: t for t in client.get("/api/tools").json()}
    assert listed["kb.search"]["input_schema"]["properties"]["limit"]["maximum"] == 25
    assert "maximum" not in listed["kb.read"]["input_schema"]["properties"]["ref"]
    status, message = tool(client, "kb.search", query="x", limit=26)
    assert status == 422
    assert message == (
        "limit must be between 1 and 25 (SUBSPACE_MAX_SEARCH_LIMIT), got 26. Ask for at most 25."
    )
