"""The agent tools as a table: each tool's name, description, arguments and the function it
runs, over the search, grep and reading the `search` package owns.

`kb.search` ranks (the hybrid search), `kb.grep` finds every occurrence (an exhaustive scan),
`kb.read` and `kb.node.read` fetch whole pages and subtrees once a target is known. All are
reads, so none needs approval. Output is compact text with refs an agent can cite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from subspace.config import Settings
from subspace.context import Context
from subspace.errors import InvalidInput, NotFound, closest
from subspace.search.grep import grep
from subspace.search.options import (
    DEFAULT_GREP_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    GREP_MAX_RESULTS,
    Answers,
    Kind,
)
from subspace.search.reading import kb_node_read, read_ref, ref_target
from subspace.search.request import SearchRequest
from subspace.search.searcher import Searcher
from subspace.search.service import search


class SearchArgs(BaseModel):
    """The arguments of `kb.search`. JSON types are taken as they are: "5" is not a number,
    "file" is not a list of kinds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    query: str = Field(
        default="",
        description='What to look for: words, "an exact phrase", -excluded words, or a question.',
    )
    kinds: list[Kind] | None = Field(
        default=None,
        description="Only these kinds of item; all kinds when absent.",
    )
    limit: int = Field(
        default=DEFAULT_SEARCH_LIMIT,
        ge=1,
        description="Most hits to return, 1 to the server's SUBSPACE_MAX_SEARCH_LIMIT (100 unless "
        "changed).",
    )
    answers: Answers = Field(
        default="include",
        description="Bullets earlier answers wrote: include (ranked below their sources), "
        "exclude, or only.",
    )


class GrepArgs(BaseModel):
    """The arguments of `kb.grep`; `regex` must be a JSON boolean, not "false"."""

    model_config = ConfigDict(extra="forbid", strict=True)

    pattern: str = Field(default="", description="The exact text (any case) or the regex.")
    regex: bool = Field(
        default=False,
        description="true: pattern is a Postgres regular expression (prefix (?i) to ignore case).",
    )
    limit: int = Field(
        default=DEFAULT_GREP_LIMIT,
        ge=1,
        le=GREP_MAX_RESULTS,
        description=f"Most matches to return, 1 to {GREP_MAX_RESULTS}.",
    )
    # Any shape is taken here: the cursor's own reader answers 400 for one it did not sign.
    cursor: Any = Field(
        default=None,
        description="The cursor a previous kb.grep printed, to continue from it.",
        json_schema_extra={"type": ["string", "null"]},  # what a model should send
    )


class ReadArgs(BaseModel):
    """The arguments of `kb.read`: a ref from kb.search or kb.grep (`page_id` is its old name)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ref: str = Field(
        validation_alias=AliasChoices("ref", "page_id"),
        description="A ref as kb.search and kb.grep print them: page:<id>, node:<id>, "
        "file:<id> or file:<id>:<n>, mail:<id>, or a bare page id.",
    )


class NodeReadArgs(BaseModel):
    """The arguments of `kb.node.read` (`node_id` is its old name)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ref: str = Field(
        validation_alias=AliasChoices("ref", "node_id"),
        description="A bullet's ref, node:<id>, or its bare id.",
    )


def kb_search(
    cx: Context,
    searcher: Searcher,
    query: str,
    *,
    kinds: list[str] | None = None,
    limit: int = DEFAULT_SEARCH_LIMIT,
    answers: str = "include",
) -> str:
    """Ranked hits as text, one per line: type, title › breadcrumb, passage, and ref.

    `limit` is honoured up to SUBSPACE_MAX_SEARCH_LIMIT (beyond it, InvalidInput says so).
    """
    request = SearchRequest(query=query, kinds=kinds, limit=limit, answers=answers)
    response = search(cx, searcher, request)
    lines = []
    for number, row in enumerate(response.rows, start=1):
        place = " › ".join(row.breadcrumb) if row.breadcrumb else row.title
        passage = " ".join(row.passage.split())
        kind = f"{row.type}, answer" if row.answer else row.type
        lines.append(f"{number}. [{kind}] {place} — {passage} ({row.ref})")
    if not lines:
        lines += response.notes or ["No results."]
    if response.degraded:
        lines.append(f"(degraded: {'; '.join(response.degraded)})")
    return "\n".join(lines)


# -- the tools as data: what MCP, the HTTP API and the chat agents list and call -----------


@dataclass(frozen=True)
class ToolSpec:
    """One agent tool: its name, a description written for a model, the strict pydantic model
    of its arguments (whose JSON schema is the tool's input schema), whether it only reads,
    and the function that runs it on validated arguments."""

    name: str
    description: str
    args: type[BaseModel]
    read_only: bool
    run: Callable[[Context, Searcher, BaseModel], str]

    @property
    def needs_approval(self) -> bool:
        """Tools that change nothing run without asking the user first."""
        return not self.read_only

    def input_schema(self, settings: Settings | None = None) -> dict[str, Any]:
        """The JSON schema of the arguments; with `settings`, kb.search's `limit` also carries
        its maximum, SUBSPACE_MAX_SEARCH_LIMIT (a setting, so not part of the static model)."""
        schema = self.args.model_json_schema()
        if settings is not None and self.args is SearchArgs:
            schema["properties"]["limit"]["maximum"] = settings.max_search_limit
        return schema


def _run_search(cx: Context, searcher: Searcher, args: BaseModel) -> str:
    assert isinstance(args, SearchArgs)
    kinds: list[str] | None = None if args.kinds is None else list(args.kinds)
    return kb_search(cx, searcher, args.query, kinds=kinds, limit=args.limit, answers=args.answers)


def _run_grep(cx: Context, searcher: Searcher, args: BaseModel) -> str:
    assert isinstance(args, GrepArgs)
    result = grep(cx, args.pattern, regex=args.regex, limit=args.limit, cursor=args.cursor)
    if result.next_cursor is None:
        return result.render()
    # The model can pass back only what it read: the cursor goes into the text.
    return (
        f"{result.render()}\nTo continue, call kb.grep again with the same pattern and "
        f'"cursor": "{result.next_cursor}".'
    )


def _run_read(cx: Context, searcher: Searcher, args: BaseModel) -> str:
    assert isinstance(args, ReadArgs)
    parsed = ref_target(args.ref)
    if parsed is None:
        raise InvalidInput(
            f"ref: {_shown(args.ref)} is not a ref. Give one as kb.search or kb.grep print "
            "them, such as page:<id>, node:<id>, file:<id>:<n> or mail:<id>."
        )
    return read_ref(cx, *parsed)


def _run_node_read(cx: Context, searcher: Searcher, args: BaseModel) -> str:
    assert isinstance(args, NodeReadArgs)
    parsed = ref_target(args.ref)
    bare = parsed is not None and ":" not in args.ref.strip()
    if parsed is None or not (bare or parsed[0] == "node"):  # a memory's ref reads as a node
        raise InvalidInput(
            f"ref: {_shown(args.ref)} is not a bullet's ref. Give node:<id> (or the bare id); "
            "read pages, files and mail with kb.read."
        )
    return kb_node_read(cx, parsed[1])


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:80] + "…")


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "kb.search",
        "Search the knowledge base by meaning and by words (hybrid ranking) over pages, "
        "bullets, memory items, file text and mail. Returns the best hits, one per line: "
        "[kind] page › breadcrumb — passage (ref). Use it to find where something is "
        "discussed; follow a ref with kb.read or kb.node.read to see the whole item. For "
        "every occurrence of an exact string, use kb.grep instead.",
        SearchArgs,
        read_only=True,
        run=_run_search,
    ),
    ToolSpec(
        "kb.grep",
        "Find every occurrence of an exact string (any case) or a regular expression in "
        "bullets, file text and mail, exhaustively and in a stable order. Returns one line "
        "per item: ref (title) ×count: snippet. When it stops at the limit or the time "
        "limit it says so; pass its cursor back to continue.",
        GrepArgs,
        read_only=True,
        run=_run_grep,
    ),
    ToolSpec(
        "kb.read",
        "Read one item whole by the ref kb.search or kb.grep printed: a page as an indented "
        "outline with a node ref on every bullet, a bullet with everything under it, a "
        "file's text (or one chunk of it), or a mail.",
        ReadArgs,
        read_only=True,
        run=_run_read,
    ),
    ToolSpec(
        "kb.node.read",
        "Read one bullet and everything nested under it, by its node:<id> ref, with the "
        "title of its page.",
        NodeReadArgs,
        read_only=True,
        run=_run_node_read,
    ),
)
_BY_NAME = {spec.name: spec for spec in TOOLS}


def tool_named(name: str) -> ToolSpec:
    """The tool called `name`; NotFound naming the tools there are otherwise."""
    spec = _BY_NAME.get(name)
    if spec is None:
        names = [s.name for s in TOOLS]
        known = ", ".join(names[:-1]) + " and " + names[-1]
        shown = name if len(name) <= 100 else name[:100] + "…"
        raise NotFound(
            "tool",
            name,
            message=f"No tool is named {shown!r}. The tools are {known} (GET /api/tools).",
        )
    return spec


# Where a caller finds a tool's schema, said at the end of an arguments error: each surface
# names its own (an MCP client has no HTTP route to call, a model has its tool definitions).
SCHEMA_IN_DEFINITION = "the tool's input schema lists its arguments"
SCHEMA_AT_HTTP = "GET /api/tools gives each tool's input_schema"
SCHEMA_AT_MCP = "tools/list gives each tool's inputSchema"


def validate_arguments(
    spec: ToolSpec, arguments: object, schema_at: str = SCHEMA_IN_DEFINITION
) -> BaseModel:
    """The tool's arguments checked against its model; InvalidInput naming each wrong field
    and what it should be otherwise, and where the schema is (`schema_at`)."""
    if not isinstance(arguments, dict):
        raise InvalidInput(
            f"The arguments of {spec.name} must be a JSON object of named values, "
            f"got {type(arguments).__name__}."
        )
    try:
        return spec.args.model_validate(arguments)
    except ValidationError as exc:
        raise InvalidInput(_describe(spec, exc, schema_at)) from None


def call_tool(
    cx: Context,
    searcher: Searcher,
    name: str,
    arguments: dict[str, Any],
    schema_at: str = SCHEMA_IN_DEFINITION,
) -> str:
    """The text an agent reads after calling tool `name` with `arguments` (a JSON object).

    >>> call_tool(cx, searcher, "kb.read", {"ref": "page:6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27"})
    '# Runbook (page:6f1c0a4e-...)\\n- Drain the node ...'
    """
    spec = tool_named(name)
    return spec.run(cx, searcher, validate_arguments(spec, arguments, schema_at))


def _describe(spec: ToolSpec, exc: ValidationError, schema_at: str) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = str(error["msg"])
        if error["type"] == "extra_forbidden":
            known = list(spec.args.model_fields)
            meant = closest(str(error["loc"][-1]), known)
            message = "is not an argument of this tool" + (
                f" (did you mean '{meant}'?)" if meant else ""
            )
            message += f"; its arguments are: {', '.join(known)}"
        parts.append(f"{where}: {message}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return (
        f"Invalid arguments for {spec.name}: {'; '.join(parts)}{more}. Fix these fields and "
        "retry; "
        f"{schema_at}."
    )
