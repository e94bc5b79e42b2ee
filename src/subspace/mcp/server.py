"""One MCP server over the agent tools; each transport says who is calling.

The tools, their argument schemas and their limits come from `agents.tools`, so a model
sees over MCP exactly what the HTTP tool routes give: the same checks, the same visibility,
the same compact text with refs that `kb.read` and `kb.node.read` accept back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp_types import INVALID_PARAMS
from psycopg_pool import PoolTimeout

from subspace import __version__
from subspace.agents import tools
from subspace.config import Settings
from subspace.context import Context
from subspace.errors import Busy, NotFound, SubspaceError
from subspace.search.searcher import Searcher

log = logging.getLogger(__name__)

# Who a call acts for: the stdio command's key, or the HTTP request's. It runs in a worker
# thread (it may query the database) and raises SubspaceError when the key no longer works.
Resolver = Callable[[ServerRequestContext[Any, Any]], tuple[Context, Searcher]]

INSTRUCTIONS = (
    "Search and read a Subspace knowledge base. kb.search ranks hits; kb.grep finds every "
    "occurrence of a string; kb.read and kb.node.read take the refs those print "
    "(page:<id>, node:<id>) and return whole pages or subtrees."
)


def list_tools(settings: Settings | None = None) -> list[types.Tool]:
    """The agent tools as MCP tools: name, description, JSON schema (with the limits the
    settings give) and read-only hint."""
    return [
        types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.input_schema(settings),
            annotations=types.ToolAnnotations(
                read_only_hint=spec.read_only, destructive_hint=not spec.read_only
            ),
        )
        for spec in tools.TOOLS
    ]


def build_server(resolve: Resolver, settings: Settings | None = None) -> Server[Any]:
    """An MCP server whose tool calls act as whoever `resolve` names for each request."""

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list_tools(settings))

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        def run() -> str:
            cx, searcher = resolve(ctx)
            return tools.call_tool(
                cx, searcher, params.name, params.arguments or {}, tools.SCHEMA_AT_MCP
            )

        try:
            text = await anyio.to_thread.run_sync(run)
        except NotFound as exc:
            if params.name not in {spec.name for spec in tools.TOOLS}:
                # An unknown tool is the client's protocol mistake, not a result to read.
                raise _protocol_error(exc.message) from None
            return _error(exc.message)
        except SubspaceError as exc:
            return _error(exc.message)
        except PoolTimeout:
            return _error(
                "The server is busy: every database connection is in use. "
                f"Retry in {Busy.retry_after_s} s."
            )
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(
        "subspace",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def _error(message: str) -> types.CallToolResult:
    """A failed call the model can read and correct (bad arguments, an unknown ref)."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _protocol_error(message: str) -> Exception:
    from mcp.shared.exceptions import MCPError

    return MCPError(INVALID_PARAMS, message)
