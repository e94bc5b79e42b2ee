"""`subspace mcp`: the MCP server on stdin and stdout, acting as one API key.

A client may write its requests and close stdin at once (a shell pipe, a CI job). The SDK's
server stops at the end of its input and drops the calls still running, so the end of stdin
is held back from it until every request read has been answered (or DRAIN_S has passed).
A request the client cancels is never answered, so it is owed no longer; a line that is not
JSON-RPC is answered here with a parse error (the SDK would pass over it in silence).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.keys import authenticate
from subspace.mcp.server import build_server
from subspace.providers.base import EmbeddingProvider

log = logging.getLogger(__name__)

DRAIN_S = 300.0  # longest the answers still owed may take once stdin has closed

CANCELLED = "notifications/cancelled"  # the SDK never answers a request cancelled this way

Incoming = SessionMessage | Exception  # what the client sent: a message, or why a line was not one


def serve_stdio(db: Database, settings: Settings, provider: EmbeddingProvider | None) -> None:
    """Serve until the client closes stdin and every request it sent is answered.
    Unauthorized at once when SUBSPACE_API_KEY is not a live key; the key is checked again on
    every call, so revoking it stops the tools."""

    def context() -> Context:
        with db.request_pool.connection() as conn:
            actor = authenticate(conn, settings.api_key)
        return db.context(actor, settings)

    context()
    searcher = db.searcher(provider)
    anyio.run(_serve, build_server(lambda _request: (context(), searcher), settings))


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (from_client, to_client):
        await serve_until_answered(server, from_client, to_client)


async def serve_until_answered(
    server: Server[Any],
    from_client: ObjectReceiveStream[Incoming],
    to_client: ObjectSendStream[SessionMessage],
    drain_s: float = DRAIN_S,
) -> None:
    """Run `server` between the client's streams, passing the end of the client's input on
    only once every request read from it has its answer written."""
    to_server, server_reads = anyio.create_memory_object_stream[Incoming]()
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage]()
    owed: Counter[str | int] = Counter()  # a client may reuse an id: each use is answered
    answered = anyio.Event()
    answered.set()

    def settle(request_id: object) -> None:
        if isinstance(request_id, str | int) and owed[request_id] > 0:
            owed[request_id] -= 1
            if not +owed:
                answered.set()

    async def relay_requests() -> None:
        nonlocal answered
        async with to_server, server_writes.clone() as refusals:
            async for item in from_client:
                if isinstance(item, Exception):
                    await refusals.send(_parse_error(item))
                    continue
                message = item.message
                if isinstance(message, JSONRPCRequest):
                    if not +owed:
                        answered = anyio.Event()
                    owed[message.id] += 1
                elif isinstance(message, JSONRPCNotification) and message.method == CANCELLED:
                    settle((message.params or {}).get("requestId"))
                await to_server.send(item)
            with anyio.move_on_after(drain_s) as waited:
                await answered.wait()
            if waited.cancelled_caught:
                unanswered = sorted(map(str, (+owed).elements()))
                log.warning("stdin closed; %d requests still unanswered after %.0f s: %s",
                            len(unanswered), drain_s, unanswered)  # fmt: skip

    async def relay_answers() -> None:
        async with from_server, to_client:
            async for message in from_server:
                await to_client.send(message)
                if isinstance(message.message, JSONRPCResponse | JSONRPCError):
                    settle(message.message.id)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(relay_requests)
        tasks.start_soon(relay_answers)
        await server.run(server_reads, server_writes, server.create_initialization_options())


def _parse_error(problem: Exception) -> SessionMessage:
    """JSON-RPC's answer to a line that is not a message: its id cannot be known, so null."""
    reason = str(problem).splitlines()[0] if str(problem) else type(problem).__name__
    error = ErrorData(
        code=PARSE_ERROR,
        message=f"Not a JSON-RPC message ({reason[:200]}); send one JSON object per line.",
    )
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error))
