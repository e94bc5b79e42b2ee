"""`subspace mcp`: the MCP server on stdin and stdout, acting as one API key."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server import Server
from mcp.server.stdio import stdio_server

from subspace.config import Settings
from subspace.context import Context
from subspace.keys import authenticate
from subspace.mcp.server import build_server
from subspace.providers.base import EmbeddingProvider
from subspace.runtime import Database


def serve_stdio(db: Database, settings: Settings, provider: EmbeddingProvider | None) -> None:
    """Serve until the client closes stdin. Unauthorized at once when SUBSPACE_API_KEY is not
    a live key; the key is checked again on every call, so revoking it stops the tools."""

    def context() -> Context:
        with db.request_pool.connection() as conn:
            actor = authenticate(conn, settings.api_key)
        return db.context(actor, settings)

    context()
    searcher = db.searcher(provider)
    anyio.run(_serve, build_server(lambda _request: (context(), searcher), settings))


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
