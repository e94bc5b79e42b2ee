"""`/mcp`: the MCP server over streamable HTTP inside the FastAPI app, behind an API key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from psycopg_pool import PoolTimeout
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from subspace.api.auth import header_key
from subspace.api.errors import BUSY_POOL, error_reply, error_response
from subspace.api.search_observer import request_searcher
from subspace.api.state import database
from subspace.context import Context
from subspace.errors import SubspaceError, Unauthorized
from subspace.keys import authenticate
from subspace.mcp.server import build_server
from subspace.search.searcher import Searcher

PATH = "/mcp"
_CONTEXT_KEY = "subspace.context"  # the caller's Context, set on the ASGI scope per request


def _resolve(ctx: ServerRequestContext[Any, Any]) -> tuple[Context, Searcher]:
    request = ctx.request
    if not isinstance(request, Request) or _CONTEXT_KEY not in request.scope:
        raise Unauthorized("No API key. Send `Authorization: Bearer <key>` or `X-API-Key`.")
    return request.scope[_CONTEXT_KEY], request_searcher(request)


@asynccontextmanager
async def run_mcp(app: FastAPI) -> AsyncIterator[None]:
    """Serve `/mcp` for as long as the app runs (a session manager lives once, so each
    lifespan makes its own). Stateless JSON: every POST carries its own key and answer."""
    manager = StreamableHTTPSessionManager(
        build_server(_resolve, app.state.settings), json_response=True, stateless=True
    )
    async with manager.run():
        app.state.mcp = manager
        try:
            yield
        finally:
            app.state.mcp = None


class McpEndpoint:
    """The ASGI endpoint of `/mcp`: 401 without a valid key, else the MCP transport."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        if request.method != "POST":
            # Stateless, so there is no stream for the server's own messages (GET) and no
            # session to end (DELETE). The transport's spec allows 405 for both; held open,
            # each GET would keep a connection and a task for as long as its client wished.
            refused = error_response(
                405,
                "method_not_allowed",
                f"{PATH} answers POST only: each JSON-RPC request gets its answer in the "
                "response, with no event stream (GET) or session (DELETE) to open or end.",
            )
            refused.headers["Allow"] = "POST"
            await refused(scope, receive, send)
            return
        # The cookie is not taken: MCP clients send a header, and a browser cannot be made to.
        token = header_key(request)
        if not token:
            response = error_response(
                401,
                Unauthorized.code,
                "No API key. Send `Authorization: Bearer <key>` or `X-API-Key: <key>`; create a "
                "key with `subspace keys create`.",
            )
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        manager: StreamableHTTPSessionManager | None = getattr(request.app.state, "mcp", None)
        try:
            cx = await run_in_threadpool(_context, request, token)
        except SubspaceError as exc:
            await error_reply(exc)(scope, receive, send)
            return
        except PoolTimeout:
            await error_reply(BUSY_POOL)(scope, receive, send)
            return
        if manager is None:
            await error_response(
                503,
                "mcp_not_running",
                "The MCP endpoint runs with the server's lifespan, which has not started. "
                "Start the server with `subspace serve`.",
            )(scope, receive, send)
            return
        await manager.handle_request({**scope, _CONTEXT_KEY: cx}, receive, send)


def _context(request: Request, token: str) -> Context:
    db = database(request)
    with db.request_pool.connection() as conn:
        actor = authenticate(conn, token)
    return db.context(actor, request.app.state.settings)
