"""/api/search, /api/grep and the agent tools over HTTP."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import BaseModel, ConfigDict

from subspace.agents import tools
from subspace.api.auth import require_context
from subspace.api.cancelling import unless_gone
from subspace.api.openapi import KEYED, error_responses
from subspace.api.positions import READER, require_read_context
from subspace.api.search_observer import request_searcher
from subspace.context import Context
from subspace.errors import InvalidInput
from subspace.search import grep as grepping
from subspace.search.options import (
    DEFAULT_GREP_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    Mode,
)
from subspace.search.request import SearchRequest, SearchResponse
from subspace.search.service import search

# 400 for a cursor this server did not issue; 404 for a tool given an unknown id or name.
router = APIRouter(tags=["search"], responses=error_responses(*KEYED, 400, 404))
CX = Annotated[Context, Depends(require_context)]
# What one search answers, for the docs (SearchResponse is the service's dataclass).
SEARCH_ANSWER: dict[int | str, Any] = {
    200: {
        "content": {
            "application/json": {
                "example": {
                    "query": "launch date",
                    "mode": "hybrid",
                    "rows": [
                        {
                            "type": "node",
                            "id": "7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                            "ref": "node:7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                            "title": "Launch plan",
                            "passage": "Launch date: ship the beta on Friday",
                            "highlights": [[0, 6], [7, 11]],
                            "kb_id": "3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b",
                            "knowledge_base": "Engineering",
                            "score": 0.0328,
                            "legs": {
                                "lexical": {"rank": 1, "score": 0.61},
                                "vector": {"rank": 1, "score": 0.82},
                            },
                            "created_at": "2026-11-30T09:12:00Z",
                            "updated_at": "2026-11-30T09:12:00Z",
                            "breadcrumb": ["Launch plan"],
                            "page_id": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                        }
                    ],
                    "legs": {
                        "lexical": {"ran": True, "candidates": 1, "ms": 2.1, "weight": 1.0},
                        "vector": {"ran": True, "candidates": 12, "ms": 4.3, "weight": 1.0},
                    },
                    "degraded": [],
                    "pending_embeddings": 0,
                    "is_question": False,
                    "next_cursor": None,
                    "took_ms": 9.8,
                }
            }
        }
    }
}


@router.post("/api/search", responses=SEARCH_ANSWER)
async def search_post(request: Request, body: SearchRequest, cx: READER) -> SearchResponse:
    """The hybrid search, with every option. A client that closes its connection before the
    answer (the palette, superseded by the next keystroke) stops the search."""
    return await _search_unless_gone(request, cx, body)


@router.get("/api/search", responses=SEARCH_ANSWER)
async def search_get(
    request: Request,
    cx: READER,
    q: str = "",
    kb: Annotated[list[UUID] | None, Query()] = None,
    kind: Annotated[list[str] | None, Query()] = None,
    mode: Mode = "hybrid",
    limit: int = DEFAULT_SEARCH_LIMIT,
    explain: bool = False,
    group_by_page: bool = False,
    cursor: str | None = None,
) -> SearchResponse:
    """The hybrid search for links and the palette: `?q=…&kind=node&kb=…`."""
    body = SearchRequest(query=q, kb_ids=kb, kinds=kind, mode=mode, limit=limit,
                         explain=explain, group_by_page=group_by_page, cursor=cursor)  # fmt: skip
    return await _search_unless_gone(request, cx, body)


async def _search_unless_gone(request: Request, cx: Context, body: SearchRequest) -> SearchResponse:
    searcher = request_searcher(request)
    return await unless_gone(
        request, lambda cancel: search(cx, searcher.cancelled_by(cancel), body)
    )


class GrepOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "matches": [
                        {
                            "ref": "node:7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                            "line": "Ship the beta on Friday",
                        }
                    ],
                    "next_cursor": None,
                    "timed_out": False,
                    "capped": False,
                    "message": "1 match.",
                }
            ]
        }
    )

    matches: list[dict[str, Any]]
    next_cursor: str | None
    timed_out: bool
    capped: bool
    message: str


@router.get("/api/grep")
def grep(
    cx: READER,
    pattern: str,
    regex: bool = False,
    limit: int = DEFAULT_GREP_LIMIT,
    cursor: str | None = None,
) -> GrepOut:
    """Every occurrence of `pattern` in visible bullets, file text and mail."""
    result = grepping.grep(cx, pattern, regex=regex, limit=limit, cursor=cursor)
    return GrepOut(
        matches=[vars(m) for m in result.matches],
        next_cursor=result.next_cursor,
        timed_out=result.timed_out,
        capped=result.capped,
        message=result.message,
    )


# A tool's arguments, bare or wrapped as {"arguments": {...}} (as MCP sends them).
ToolArguments = Annotated[
    dict[str, Any] | None,
    Body(
        examples=[{"query": "launch date", "limit": 5}, {"arguments": {"query": "launch date"}}],
        description="The tool's arguments as a JSON object, bare or wrapped in `arguments`.",
    ),
]


def unwrapped(body: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a tool call: `{"arguments": {...}}` is a wrapper, anything else is the
    arguments themselves (no tool has an argument named `arguments`)."""
    if "arguments" not in body:
        return body
    inner = body["arguments"]
    if not isinstance(inner, dict):
        raise InvalidInput(
            f"arguments must be a JSON object of the tool's arguments, got "
            f'{type(inner).__name__}. Send them bare ({{"query": "…"}}) or wrapped '
            '({"arguments": {"query": "…"}}).'
        )
    if len(body) > 1:
        others = ", ".join(sorted(k for k in body if k != "arguments"))
        raise InvalidInput(
            f"The body holds both `arguments` and {others}. Send the tool's arguments either "
            "bare or wrapped in `arguments`, not both."
        )
    return inner


class ToolOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "tool": "kb.search",
                    "read_only": True,
                    "needs_approval": False,
                    "text": "1. Launch plan (node:7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60)\n"
                    "   Ship the beta on Friday",
                }
            ]
        }
    )

    tool: str
    read_only: bool
    needs_approval: bool
    text: str


class ToolInfo(BaseModel):
    name: str
    description: str
    read_only: bool
    needs_approval: bool
    input_schema: dict[str, Any]


@router.get("/api/tools")
def list_tools(cx: CX) -> list[ToolInfo]:
    """The agent tools: what each does, whether it needs approval, and its arguments' schema."""
    return [
        ToolInfo(
            name=spec.name,
            description=spec.description,
            read_only=spec.read_only,
            needs_approval=spec.needs_approval,
            input_schema=spec.input_schema(cx.settings),
        )
        for spec in tools.TOOLS
    ]


@router.post("/api/tools/{name}")
def call_tool(name: str, request: Request, cx: CX, body: ToolArguments = None) -> ToolOut:
    """Call an agent tool by name with its arguments, bare (`{"query": "ferry"}`) or wrapped
    (`{"arguments": {"query": "ferry"}}`); the answer is the text an agent would read."""
    spec = tools.tool_named(name)
    if spec.read_only:  # a replica may answer it
        cx = require_read_context(request, cx)
    arguments = unwrapped(body or {})
    searcher = request_searcher(request)
    text = tools.call_tool(cx, searcher, name, arguments, tools.SCHEMA_AT_HTTP)
    return ToolOut(
        tool=name, read_only=spec.read_only, needs_approval=spec.needs_approval, text=text
    )
