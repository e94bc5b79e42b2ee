"""`subspace mcp`: the MCP server on stdin and stdout, acting as one API key.

A client may write its requests and close stdin at once (a shell pipe, a CI job). The SDK's
server stops at the end of its input and drops the calls still running, so the end of stdin
is held back from it until every request read has been answered (or DRAIN_S has passed).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from subspace.config import Settings
from subspace.context import Context
from subspace.keys import authenticate
from subspace.mcp.server import build_server
from subspace.providers.base import EmbeddingProvider
from subspace.runtime import Database

log = logging.getLogger(__name__)

DRAIN_S = 300.0  # longest the answers still owed may take once stdin has closed

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
    owed: set[str | int] = set()
    answered = anyio.Event()
    answered.set()

    async def relay_requests() -> None:
        nonlocal answered
        async with to_server:
            async for item in from_client:
                if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                    if not owed:
                        answered = anyio.Event()
                    owed.add(item.message.id)
                await to_server.send(item)
            with anyio.move_on_after(drain_s) as waited:
                await answered.wait()
            if waited.cancelled_caught:
                log.warning("stdin closed; %d requests still unanswered after %.0f s: %s",
                            len(owed), drain_s, sorted(map(str, owed)))  # fmt: skip

    async def relay_answers() -> None:
        async with from_server, to_client:
            async for message in from_server:
                await to_client.send(message)
                if isinstance(message.message, JSONRPCResponse | JSONRPCError):
                    owed.discard(message.message.id)
                    if not owed:
                        answered.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(relay_requests)
        tasks.start_soon(relay_answers)
        await server.run(server_reads, server_writes, server.create_initialization_options())
