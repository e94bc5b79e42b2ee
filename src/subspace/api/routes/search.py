"""/api/search, /api/grep and the agent tools over HTTP."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field, ValidationError

from subspace.agents import tools
from subspace.api.auth import require_context
from subspace.context import Context
from subspace.errors import InvalidInput, NotFound
from subspace.search.filters import TagFilter
from subspace.search.service import SearchRequest, SearchResponse, search

router = APIRouter(tags=["search"])
ArgsT = TypeVar("ArgsT", bound=BaseModel)
CX = Annotated[Context, Depends(require_context)]


class TagFilterIn(BaseModel):
    tag: str
    op: str
    value: bool | float | str
    value2: bool | float | str | None = None


class SearchIn(BaseModel):
    query: str = ""
    knowledge_bases: list[UUID] | None = None
    kinds: list[str] | None = None
    tags: list[TagFilterIn] | None = None
    mode: Literal["hybrid", "lexical", "vector"] = "hybrid"
    limit: int = 10
    weights: dict[str, float] | None = None
    explain: bool = False
    explain_target: str | None = Field(
        default=None, description="A ref or id to explain if absent."
    )
    group_by_page: bool = False
    cursor: str | None = None
    ranker: Literal["bm25", "ts_rank_cd"] | None = None
    typos: bool = True


def _run(request: Request, cx: Context, body: SearchIn) -> SearchResponse:
    tags = [TagFilter(t.tag, t.op, t.value, t.value2) for t in body.tags or []]
    return search(
        cx,
        request.app.state.provider,
        SearchRequest(
            query=body.query,
            kb_ids=body.knowledge_bases,
            kinds=body.kinds,
            tags=tags,
            mode=body.mode,
            limit=body.limit,
            weights=body.weights,
            explain=body.explain,
            explain_target=body.explain_target,
            group_by_page=body.group_by_page,
            cursor=body.cursor,
            ranker=body.ranker,
            typos=body.typos,
        ),
    )


@router.post("/api/search")
def search_post(request: Request, body: SearchIn, cx: CX) -> SearchResponse:
    """The hybrid search, with every option."""
    return _run(request, cx, body)


@router.get("/api/search")
def search_get(
    request: Request,
    cx: CX,
    q: str = "",
    kb: Annotated[list[UUID] | None, Query()] = None,
    kind: Annotated[list[str] | None, Query()] = None,
    mode: Literal["hybrid", "lexical", "vector"] = "hybrid",
    limit: int = 10,
    explain: bool = False,
    group_by_page: bool = False,
    cursor: str | None = None,
) -> SearchResponse:
    """The hybrid search for links and the palette: `?q=…&kind=node&kb=…`."""
    body = SearchIn(query=q, knowledge_bases=kb, kinds=kind, mode=mode, limit=limit,
                    explain=explain, group_by_page=group_by_page, cursor=cursor)  # fmt: skip
    return _run(request, cx, body)


class GrepOut(BaseModel):
    matches: list[dict[str, Any]]
    next_cursor: str | None
    timed_out: bool
    capped: bool
    message: str


@router.get("/api/grep")
def grep(
    cx: CX, pattern: str, regex: bool = False, limit: int = 100, cursor: str | None = None
) -> GrepOut:
    """Every occurrence of `pattern` in visible bullets, file text and mail."""
    result = tools.kb_grep(cx, pattern, regex=regex, limit=limit, cursor=cursor)
    return GrepOut(
        matches=[vars(m) for m in result.matches],
        next_cursor=result.next_cursor,
        timed_out=result.timed_out,
        capped=result.capped,
        message=result.message,
    )


class ToolCall(BaseModel):
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolOut(BaseModel):
    tool: str
    needs_approval: bool
    text: str


@router.get("/api/tools")
def list_tools(cx: CX) -> list[dict[str, Any]]:
    """The agent tools and whether each needs approval."""
    return [vars(spec) for spec in tools.TOOLS]


@router.post("/api/tools/{name}")
def call_tool(name: str, body: ToolCall, request: Request, cx: CX) -> ToolOut:
    """Call an agent tool by name; the answer is the text an agent would read."""
    args = body.arguments
    spec = next((s for s in tools.TOOLS if s.name == name), None)
    if spec is None:
        names = [s.name for s in tools.TOOLS]
        known = ", ".join(names[:-1]) + " and " + names[-1]
        shown = name if len(name) <= 100 else name[:100] + "…"
        raise NotFound(
            "tool",
            name,
            message=f"No tool is named {shown!r}. The tools are {known} (GET /api/tools).",
        )
    if name == "kb.search":
        found = _arguments(tools.SearchArgs, args)
        text = tools.kb_search(cx, request.app.state.provider, found.query,
                               kinds=found.kinds, limit=found.limit)  # fmt: skip
    elif name == "kb.grep":
        grep_args = _arguments(tools.GrepArgs, args)
        text = tools.kb_grep(cx, grep_args.pattern, regex=grep_args.regex,
                             limit=grep_args.limit, cursor=grep_args.cursor).render()  # fmt: skip
    elif name == "kb.read":
        text = tools.kb_read(cx, _uuid(args, "page_id"))
    else:
        text = tools.kb_node_read(cx, _uuid(args, "node_id"))
    return ToolOut(tool=name, needs_approval=spec.needs_approval, text=text)


def _arguments(model: type[ArgsT], args: dict[str, Any]) -> ArgsT:
    """The tool's arguments checked against its model; a mismatch is a 422 naming the field."""
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        errors = [{**e, "loc": ("arguments", *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None


def _uuid(args: dict[str, Any], name: str) -> UUID:
    try:
        return UUID(str(args.get(name)))
    except ValueError:
        raise InvalidInput(f"`{name}` must be an id such as a ref's uuid.") from None
