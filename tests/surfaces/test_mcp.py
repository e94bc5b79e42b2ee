"""The MCP server: the agent tools over an in-memory session, `subspace mcp` on stdio, and
`/mcp` over HTTP, each acting as one API key with exactly its rights."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
import uvicorn
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from subspace import commands
from subspace.api import create_app
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.keys import create_key, revoke_key
from subspace.mcp.server import build_server
from subspace.mcp.stdio import Incoming, serve_until_answered
from subspace.providers.fake import FakeProvider
from subspace.server import GRACEFUL_STOP_S
from subspace.workspaces import create_workspace
from tests.conftest import free_port
from tests.openai_stub import running_stub
from tests.search_helpers import index

TOOL_NAMES = {"kb.search", "kb.grep", "kb.read", "kb.node.read"}
_NODE_REF = re.compile(r"\((node:[0-9a-f-]{36})\)")


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _corpus(database: Database, cx: Context) -> dict[str, Any]:
    page = commands.create_page(cx, "Runbook")
    step = commands.add_node(cx, page.id, "Drain the zeppelin before the upgrade")
    child = commands.add_node(cx, page.id, "Then cordon it", parent_id=step.id)
    index(database, cx)
    return {"page": page, "step": step, "child": child}


async def _exercise(client: Client, corpus: dict[str, Any]) -> None:
    """What every transport must do: list the tools, call each, follow a ref, and answer a
    bad argument with a tool error the session survives."""
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} == TOOL_NAMES
    for tool in listed.tools:
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True
        assert tool.description
        assert tool.input_schema["type"] == "object"
    search_schema = next(t for t in listed.tools if t.name == "kb.search").input_schema
    assert {"query", "kinds", "limit"} <= set(search_schema["properties"])
    assert search_schema["properties"]["limit"]["maximum"] == 100  # SUBSPACE_MAX_SEARCH_LIMIT

    found = await client.call_tool("kb.search", {"query": "zeppelin", "kinds": ["node"]})
    assert not found.is_error, _text(found)
    ref = _NODE_REF.search(_text(found))
    assert ref is not None, _text(found)
    assert ref.group(1) == f"node:{corpus['step'].id}"

    read = await client.call_tool("kb.read", {"ref": ref.group(1)})
    assert not read.is_error, _text(read)
    assert "Drain the zeppelin before the upgrade" in _text(read)

    page = await client.call_tool("kb.read", {"ref": f"page:{corpus['page'].id}"})
    assert _text(page).splitlines()[0] == f"# Runbook (page:{corpus['page'].id})"

    subtree = await client.call_tool("kb.node.read", {"ref": f"node:{corpus['step'].id}"})
    assert f"Then cordon it (node:{corpus['child'].id})" in _text(subtree)

    grep = await client.call_tool("kb.grep", {"pattern": "cordon"})
    assert _text(grep).startswith(f"node:{corpus['child'].id} (Runbook) ×1:"), _text(grep)

    bad = await client.call_tool("kb.search", {"query": "zeppelin", "limit": "5"})
    assert bad.is_error
    assert "limit" in _text(bad)
    too_many = await client.call_tool("kb.search", {"query": "zeppelin", "limit": 100_000})
    assert too_many.is_error
    assert "between 1 and 100" in _text(too_many)
    with pytest.raises(MCPError, match=r"kb\.search"):
        await client.call_tool("kb.delete", {})
    again = await client.call_tool("kb.grep", {"pattern": "zeppelin"})
    assert not again.is_error


def _run(test: Callable[[], Awaitable[None]]) -> None:
    # In a thread of its own: an earlier test (the browser's) may leave an event loop
    # running in this one, and anyio.run refuses to start a second.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(anyio.run, test).result()


def test_in_memory_session_lists_calls_and_follows_refs(database: Database, cx: Context) -> None:
    corpus = _corpus(database, cx)
    server = build_server(lambda _request: (cx, database.searcher(FakeProvider())), cx.settings)

    async def session() -> None:
        async with Client(server, mode="legacy") as client:
            await _exercise(client, corpus)

    _run(session)


def test_tools_see_only_the_callers_workspace(database: Database, cx: Context) -> None:
    corpus = _corpus(database, cx)
    with database.pool.connection() as conn:
        theirs = database.context(create_workspace(conn, "Other company"), cx.settings)
    server = build_server(lambda _request: (theirs, database.searcher(FakeProvider())), cx.settings)

    async def session() -> None:
        async with Client(server) as client:
            read = await client.call_tool("kb.read", {"ref": f"page:{corpus['page'].id}"})
            assert read.is_error
            assert _text(read) == f"No page with id {corpus['page'].id} in this workspace."
            found = await client.call_tool("kb.search", {"query": "zeppelin"})
            assert _text(found).startswith("No matches for “zeppelin”: “zeppelin” is like no word")

    _run(session)


def _environment(settings: Settings, token: str) -> dict[str, str]:
    return {
        "SUBSPACE_HOME": str(settings.home),
        "SUBSPACE_DATABASE_URL": settings.database_url,
        "PROVIDERS": "fake",
        "SUBSPACE_API_KEY": token,
    }


@pytest.mark.slow
def test_subspace_mcp_over_stdio(
    database: Database, cx: Context, settings: Settings, tmp_path: Path
) -> None:
    corpus = _corpus(database, cx)
    with database.pool.connection() as conn:
        key, token = create_key(conn, cx.actor, "desktop agent")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "subspace", "mcp"], env=_environment(settings, token)
    )
    errors = tmp_path / "stderr.txt"

    async def session() -> None:
        with errors.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await _exercise(client, corpus)
                with database.pool.connection() as conn:
                    revoke_key(conn, cx.actor.workspace_id, key.id)
                after = await client.call_tool("kb.search", {"query": "zeppelin"})
                assert after.is_error
                assert "unknown or revoked" in _text(after)

    try:
        _run(session)
    except BaseException:
        print(errors.read_text())
        raise


def test_subspace_mcp_needs_a_live_key(database: Database, cx: Context, settings: Settings) -> None:
    runner = CliRunner()
    without = runner.invoke(main, ["mcp"], env=_environment(settings, ""))
    assert without.exit_code == 1
    assert "SUBSPACE_API_KEY is not set" in without.output
    assert "subspace keys create" in without.output
    with database.pool.connection() as conn:
        key, token = create_key(conn, cx.actor, "gone")
        revoke_key(conn, cx.actor.workspace_id, key.id)
    revoked = runner.invoke(main, ["mcp"], env=_environment(settings, token))
    assert revoked.exit_code == 1
    assert "unknown or revoked" in revoked.output


MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def _rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def test_mcp_over_http_needs_a_key(database: Database, cx: Context, settings: Settings) -> None:
    corpus = _corpus(database, cx)
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "agent")
        _, theirs = create_key(conn, create_workspace(conn, "Other company"), "theirs")
    with TestClient(create_app(settings, database)) as live:
        refused = live.post("/mcp", json=_rpc("tools/list"), headers=MCP_HEADERS)
        assert refused.status_code == 401
        assert "subspace keys create" in refused.json()["error"]["message"]
        wrong = live.post(
            "/mcp", json=_rpc("tools/list"), headers={**MCP_HEADERS, "x-api-key": "ssk_x_y"}
        )
        assert wrong.status_code == 401

        listed = live.post(
            "/mcp", json=_rpc("tools/list"), headers={**MCP_HEADERS, "x-api-key": token}
        )
        assert listed.status_code == 200, listed.text
        tools = listed.json()["result"]["tools"]
        assert {t["name"] for t in tools} == TOOL_NAMES
        assert all(t["annotations"]["readOnlyHint"] is True for t in tools)

        call = _rpc("tools/call", {"name": "kb.read", "arguments": {"ref": str(corpus["page"].id)}})
        bearer = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
        read = live.post("/mcp", json=call, headers=bearer)
        assert read.status_code == 200, read.text
        result = read.json()["result"]
        assert result["isError"] is False
        assert "Drain the zeppelin" in result["content"][0]["text"]

        other = live.post("/mcp", json=call, headers={**MCP_HEADERS, "x-api-key": theirs})
        assert other.json()["result"]["isError"] is True
        assert "No page with id" in other.json()["result"]["content"][0]["text"]


def test_the_sdk_client_over_http(database: Database, cx: Context, settings: Settings) -> None:
    """A real MCP client (protocol negotiation and all) against `/mcp` in the app."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    corpus = _corpus(database, cx)
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "agent")
    app = create_app(settings, database)

    async def session() -> None:
        async with (
            app.router.lifespan_context(app),
            httpx2.AsyncClient(
                transport=httpx2.ASGITransport(app=app),
                headers={"authorization": f"Bearer {token}"},
            ) as http,
            Client(streamable_http_client("http://testserver/mcp", http_client=http)) as client,
        ):
            await _exercise(client, corpus)

    _run(session)


def test_grep_prints_the_cursor_that_continues_it(database: Database, cx: Context) -> None:
    """A grep stopped at its limit says how to go on; a model can only pass back what it read."""
    page = commands.create_page(cx, "Kettles")
    first = commands.add_node(cx, page.id, "kettle one")
    second = commands.add_node(cx, page.id, "kettle two")
    server = build_server(lambda _request: (cx, database.searcher(FakeProvider())), cx.settings)

    async def session() -> None:
        async with Client(server) as client:
            stopped = _text(await client.call_tool("kb.grep", {"pattern": "kettle", "limit": 1}))
            cursor = re.search(r'"cursor": "([^"]+)"', stopped)
            assert cursor is not None, stopped
            rest = await client.call_tool(
                "kb.grep", {"pattern": "kettle", "limit": 5, "cursor": cursor[1]}
            )
            refs = {f"node:{first.id}", f"node:{second.id}"}
            assert {stopped.split(" ")[0], _text(rest).split(" ")[0]} == refs
            assert '"cursor"' not in _text(rest)

    _run(session)


def test_mcp_opens_no_stream_and_no_session(
    database: Database, cx: Context, settings: Settings
) -> None:
    """Stateless: a GET (the server-to-client event stream) and a DELETE (ending a session)
    are refused at once, with or without a key, instead of holding a connection open."""
    import httpx2

    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "agent")
    keyed = {"accept": "text/event-stream", "authorization": f"Bearer {token}"}
    app = create_app(settings, database)

    async def calls() -> None:
        async with (
            app.router.lifespan_context(app),
            httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app)) as http,
        ):
            for method in ("GET", "DELETE"):
                for headers in (keyed, {"accept": "text/event-stream"}):
                    with anyio.fail_after(5):  # held open, the stream would never answer
                        refused = await http.request(
                            method, "http://testserver/mcp", headers=headers
                        )
                    assert refused.status_code == 405, (method, refused.text)
                    assert refused.headers["allow"] == "POST"
                    assert "POST only" in refused.json()["error"]["message"]
            still = await http.post(
                "http://testserver/mcp", json=_rpc("tools/list"), headers={**keyed, **MCP_HEADERS}
            )
            assert still.status_code == 200

    _run(calls)


@pytest.mark.slow
def test_a_client_that_closes_stdin_at_once_still_gets_every_answer(
    database: Database, cx: Context, settings: Settings
) -> None:
    """A shell or CI job writes its requests and closes: each is answered before the server
    exits on the end of its input."""
    _corpus(database, cx)
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "script")
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "shell", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "kb.search", "arguments": {"query": "zeppelin"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "kb.grep", "arguments": {"pattern": "zeppelin"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "subspace", "mcp"],
        input="".join(json.dumps(r) + "\n" for r in requests),
        env={**os.environ, **_environment(settings, token)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4], done.stdout + done.stderr
    assert "zeppelin" in json.dumps(answers[2]["result"]).lower()
    assert "zeppelin" in json.dumps(answers[3]["result"]).lower()
    assert {t["name"] for t in answers[4]["result"]["tools"]} >= {"kb.search", "kb.grep"}


def _stdio_exchange(*sent: dict[str, Any] | Exception) -> list[dict[str, Any]]:
    """What `serve_until_answered` writes back for `sent`, the client's input closed after it,
    on a server whose one tool sleeps for its `s` argument."""

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        await anyio.sleep(float((params.arguments or {})["s"]))
        return types.CallToolResult(content=[types.TextContent(text="slept")])

    async def exchange() -> list[dict[str, Any]]:
        server: Server[Any] = Server("sleeper", on_call_tool=on_call_tool)
        to_server, from_client = anyio.create_memory_object_stream[Incoming](len(sent))
        to_client, written = anyio.create_memory_object_stream[SessionMessage](len(sent) + 4)
        for item in sent:
            if isinstance(item, dict):
                item = SessionMessage(types.jsonrpc_message_adapter.validate_python(item))
            await to_server.send(item)
        await to_server.aclose()
        # Nothing the test sends sleeps for long: a server still waiting after this has
        # failed to see that it owes nothing more.
        with anyio.fail_after(60):
            await serve_until_answered(server, from_client, to_client, drain_s=600)
        return [m.message.model_dump(by_alias=True, mode="json") async for m in written]

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, exchange).result()


def _sleep(request_id: int, seconds: float) -> dict[str, Any]:
    params = {"name": "sleep", "arguments": {"s": seconds}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


_HELLO = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "shell", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]  # fmt: skip


def test_stdio_stops_owing_a_request_the_client_cancels() -> None:
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    answers = _stdio_exchange(*_HELLO, _sleep(7, 3600), cancel, _sleep(8, 0))
    assert [a.get("id") for a in answers] == [0, 8]


def test_stdio_answers_every_use_of_a_reused_id() -> None:
    answers = _stdio_exchange(*_HELLO, _sleep(5, 0), _sleep(5, 0.5))
    assert [a.get("id") for a in answers] == [0, 5, 5]
    assert all("result" in a for a in answers)


def test_stdio_answers_a_line_that_is_not_json_rpc_with_a_parse_error() -> None:
    answers = _stdio_exchange(*_HELLO, ValueError("Invalid JSON: EOF while parsing"))
    [refusal] = [a for a in answers if "error" in a]
    assert refusal["id"] is None
    assert refusal["error"]["code"] == types.PARSE_ERROR
    assert "Invalid JSON" in refusal["error"]["message"]


@pytest.mark.slow
def test_a_server_stopping_finishes_the_mcp_calls_in_flight(
    database: Database, cx: Context, settings: Settings
) -> None:
    """Asked to stop while a tool call runs (its query's embedding takes a second), the
    server answers it before it stops, as `subspace serve` waits GRACEFUL_STOP_S for it."""
    _corpus(database, cx)
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "agent")
    with running_stub() as stub:
        stub.script = [{"kind": "sleep", "seconds": 1.5}] * 50
        slow = replace(settings, providers="openai", openai_api_key="sk-test",
                       openai_base_url=stub.url, embed_timeout_ms=5_000)  # fmt: skip
        port = free_port()
        app = create_app(slow, database)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, timeout_graceful_shutdown=GRACEFUL_STOP_S
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "kb.search", "arguments": {"query": "zeppelin"}}}  # fmt: skip
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(
                httpx.post, f"http://127.0.0.1:{port}/mcp", json=call, timeout=30,
                headers={**MCP_HEADERS, "authorization": f"Bearer {token}"},
            )  # fmt: skip
            deadline = time.monotonic() + 10
            while not any(r["input"] == ["zeppelin"] or r["input"] == "zeppelin"
                          for r in stub.requests):  # fmt: skip
                assert time.monotonic() < deadline, stub.requests
                time.sleep(0.02)
            server.should_exit = True  # as SIGTERM does
            reply = answer.result(timeout=30)
        thread.join(timeout=30)
    assert reply.status_code == 200, reply.text
    assert "zeppelin" in json.dumps(reply.json()["result"]).lower()
