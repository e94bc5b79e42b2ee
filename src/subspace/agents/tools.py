"""The agent tools, as plain functions over the same search, grep and read code.

`kb.search` ranks (the hybrid search), `kb.grep` finds every occurrence (an exhaustive scan),
`kb.read` and `kb.node.read` fetch whole pages and subtrees once a target is known. All are
reads, so none needs approval. Output is compact text with refs an agent can cite.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from subspace.config import Settings
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import InvalidCursor, InvalidInput, NotFound
from subspace.models import Node
from subspace.providers.base import EmbeddingProvider
from subspace.search import kinds as registry
from subspace.search.cursors import is_clean, seal, unseal, workspace_secret
from subspace.search.options import (
    DEFAULT_GREP_LIMIT,
    DEFAULT_SEARCH_LIMIT,
    GREP_MAX_RESULTS,
    Answers,
    Kind,
)
from subspace.search.service import SearchRequest, search

GREP_BATCH_ROWS = 5_000  # rows scanned per statement, so a timeout still leaves results
SNIPPET_CHARS = 160
MAX_PATTERN_CHARS = 500
# A grep cursor is a source number and one row key (a uuid, or a uuid and a chunk number):
# under 100 bytes of JSON, about 150 characters signed. Anything longer was not issued here.
MAX_GREP_CURSOR_CHARS = 512
MAX_GREP_CURSOR_INFLATED_BYTES = 256
_GREP_KEY = re.compile(r"[0-9a-f-]{36}(:[0-9]{8})?")


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
    provider: EmbeddingProvider | None,
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
    response = search(cx, provider, request)
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


@dataclass
class GrepMatch:
    ref: str
    title: str
    snippet: str
    count: int


@dataclass
class GrepResult:
    matches: list[GrepMatch] = field(default_factory=list)
    next_cursor: str | None = None
    timed_out: bool = False
    capped: bool = False
    message: str = ""

    def render(self) -> str:
        lines = [f"{m.ref} ({m.title}) ×{m.count}: {m.snippet}" for m in self.matches]
        if not lines:
            lines.append("No occurrences.")
        if self.message:
            lines.append(self.message)
        return "\n".join(lines)


@dataclass(frozen=True)
class GrepSource:
    """One table grep scans, as SQL over it: a stable key for keyset pagination, the tables
    (the kind's, joined to its item's), the text, the title, the ref, and what is visible."""

    key: str
    tables: str
    text: str
    title: str
    ref: str
    visible: str


def grep_sources() -> tuple[GrepSource, ...]:
    """The tables grep scans, in order: one per BM25 source of the registry (a memory is a
    node), with the kinds' visibility, but the kinds that declare grep=False (page titles).
    A row stored in its item's table (a mail) is searched with its item's title (the subject)
    above its text."""
    found = []
    for source in registry.sources():
        spec = registry.of_source(source)[0]
        if not spec.grep:
            continue
        a, item = spec.alias, spec.item
        i = a if spec.in_item_table else item.alias
        first, *rest = spec.ref
        key = " || ':' || ".join(
            [f"{a}.{first}::text", *(f"lpad({a}.{column}::text, 8, '0')" for column in rest)]
        )
        tables = f"{spec.table} {a}"
        text = f"{a}.{spec.text}"
        if spec.in_item_table:
            text = f"{i}.{item.title} || E'\\n' || {text}"
        else:
            tables += f" join {item.table} {i} on {spec.item_link()}"
        visible = [f"{a}.workspace_id = %(ws)s"]
        visible += [reason.visible(a) for reason in spec.row_reasons]
        visible.append(item.visible(i))
        found.append(
            GrepSource(
                key, tables, text, f"{i}.{item.title}", spec.ref_sql(), " and ".join(visible)
            )
        )
    return tuple(found)


def kb_grep(
    cx: Context,
    pattern: str,
    *,
    regex: bool = False,
    limit: int = DEFAULT_GREP_LIMIT,
    cursor: str | None = None,
) -> GrepResult:
    """Every visible bullet, file chunk and mail containing `pattern`, in a stable order.

    Exact patterns match case-insensitively; regexes are Postgres regular expressions
    (prefix `(?i)` to ignore case). The scan stops at SUBSPACE_GREP_TIMEOUT_MS or after
    `limit` matches and says so; `next_cursor` continues where it stopped.
    """
    if not pattern:
        raise InvalidInput("The grep pattern is empty. Give a string or a regex to look for.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(f"The pattern is longer than {MAX_PATTERN_CHARS} characters.")
    if not is_clean(pattern, MAX_PATTERN_CHARS):
        raise InvalidInput("The pattern contains a NUL byte or a lone surrogate; remove it.")
    if not 1 <= limit <= GREP_MAX_RESULTS:
        raise InvalidInput(
            f"The grep limit must be 1 to {GREP_MAX_RESULTS}, got {limit}. Give a number in "
            "that range, and page through more matches with the cursor."
        )
    deadline = time.monotonic() + cx.settings.grep_timeout_ms / 1000
    result = GrepResult()
    with cx.transaction() as conn:
        secret = workspace_secret(conn, cx.actor.workspace_id)
        source_index, last_key = _decode_grep_cursor(cursor, secret)
        sources = grep_sources()
        while source_index < len(sources):
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                return _stopped(result, source_index, last_key, secret, cx, timed_out=True)
            try:
                rows, scanned_to = _grep_batch(
                    conn, cx, sources[source_index], pattern, regex, last_key, remaining_ms
                )
            except psycopg.errors.QueryCanceled:
                return _stopped(result, source_index, last_key, secret, cx, timed_out=True)
            except psycopg.errors.InvalidRegularExpression as exc:
                raise InvalidInput(f"The regex is not valid: {exc}. Fix it and retry.") from None
            for row in rows:
                result.matches.append(GrepMatch(row["ref"], row["title"], row["snippet"],
                                                int(row["count"])))  # fmt: skip
                if len(result.matches) >= limit:
                    result.capped = True
                    return _stopped(result, source_index, row["key"], secret, cx, timed_out=False)
            if scanned_to is None:
                source_index, last_key = source_index + 1, ""
            else:
                last_key = scanned_to
    return result


def _grep_batch(
    conn: Conn,
    cx: Context,
    source: GrepSource,
    pattern: str,
    regex: bool,
    after: str,
    timeout_ms: int,
) -> tuple[list[dict[str, Any]], str | None]:
    """Scan one batch of a source after key `after`; return its matches and the last key
    scanned (None when the source is exhausted)."""
    key, tables, text, title = source.key, source.tables, source.text, source.title
    ref, visible = source.ref, source.visible
    if regex:
        test, position, count = (
            "body ~ %(p)s",
            "regexp_instr(body, %(p)s)",
            "regexp_count(body, %(p)s)",
        )
    else:
        test = "strpos(lower(body), lower(%(p)s)) > 0"
        position = "strpos(lower(body), lower(%(p)s))"
        count = "(length(body) - length(replace(lower(body), lower(%(p)s), ''))) / length(%(p)s)"
    with conn.transaction():
        conn.execute(f"set local statement_timeout = {max(1, timeout_ms)}")
        rows = conn.execute(
            f"with batch as (select {key} as key, {text} as body, {title} as title, {ref} as ref "
            f"from {tables} where {visible} and {key} > %(after)s order by {key} "
            f"limit {GREP_BATCH_ROWS}) "
            # One character of context either side tells whether a word was cut there;
            # offset 0 keeps the position from being computed once per use.
            f"select key, ref, title, pos, length(body) as body_len, substr(body, "
            f"greatest(1, pos - 61), {SNIPPET_CHARS + 2}) as snippet, {count} as count, "
            f"{test} as hit, max(key) over () as last_key, count(*) over () as scanned "
            f"from (select *, {position} as pos from batch offset 0) as located order by key",
            {"ws": cx.actor.workspace_id, "user": cx.actor.user_id, "p": pattern, "after": after},
        ).fetchall()
    if not rows:
        return [], None
    last = str(rows[0]["last_key"])
    exhausted = int(rows[0]["scanned"]) < GREP_BATCH_ROWS
    matches = [r for r in rows if r["hit"]]
    for match in matches:
        match["snippet"] = _word_bounded(
            str(match["snippet"]), int(match["pos"]), int(match["body_len"]),
            1 if regex else len(pattern),
        )  # fmt: skip
    return matches, None if exhausted else last


def _word_bounded(snippet: str, pos: int, body_len: int, match_len: int) -> str:
    """The snippet on one line, without the words its window cut at either end (the match
    itself is always kept). It begins one character before its window and ends one after."""
    start = max(1, pos - 61)
    offset = pos - start  # of the match within the snippet
    cut_end = start - 1 + len(snippet) < body_len
    if start > 1:
        first_space = next((i for i, c in enumerate(snippet) if c.isspace()), None)
        if first_space is not None and first_space < offset:
            snippet, offset = snippet[first_space + 1 :], offset - first_space - 1
    if cut_end:
        last_space = next((i for i in range(len(snippet) - 1, -1, -1) if snippet[i].isspace()), -1)
        if last_space >= offset + match_len:
            snippet = snippet[:last_space]
    return " ".join(snippet.split())


def _stopped(
    result: GrepResult,
    source_index: int,
    key: str,
    secret: bytes,
    cx: Context,
    *,
    timed_out: bool,
) -> GrepResult:
    result.timed_out = timed_out
    result.next_cursor = seal(secret, {"v": 2, "g": [source_index, key]})
    if timed_out:
        result.message = (
            f"Stopped at the {cx.settings.grep_timeout_ms:,} ms limit (SUBSPACE_GREP_TIMEOUT_MS):"
            " the results above are incomplete. Continue with the cursor, or narrow the pattern."
        )
    else:
        result.message = "Stopped at the result limit; continue with the cursor for more."
    return result


def _decode_grep_cursor(cursor: object, secret: bytes) -> tuple[int, str]:
    """Where an earlier grep stopped: a source number and the last key scanned there;
    InvalidCursor (400) for anything this workspace did not sign, of any shape."""
    if cursor is None or cursor == "":
        return 0, ""
    payload = unseal(
        secret,
        cursor,
        what="grep cursor",
        max_chars=MAX_GREP_CURSOR_CHARS,
        max_inflated=MAX_GREP_CURSOR_INFLATED_BYTES,
    )
    position = payload.get("g") if isinstance(payload, dict) else None
    if not (isinstance(position, list) and len(position) == 2):
        raise InvalidCursor("The grep cursor is not valid. Start again without it.")
    index, key = position
    if (
        isinstance(index, bool)
        or not isinstance(index, int)
        or not 0 <= index < len(grep_sources())
        or not isinstance(key, str)
        or not (key == "" or _GREP_KEY.fullmatch(key))
    ):
        raise InvalidCursor("The grep cursor is not valid. Start again without it.")
    return index, key


def _visible_page_tree(cx: Context, conn: Conn, page_id: UUID) -> tuple[str, list[Node]]:
    item = registry.get("page").item
    p = item.alias
    row = conn.execute(
        f"select {p}.{item.title} as title from {item.table} {p} where {p}.workspace_id = %(ws)s "
        f"and {p}.{item.key} = %(id)s and {item.visible()}",
        {"ws": cx.actor.workspace_id, "user": cx.actor.user_id, "id": page_id},
    ).fetchone()
    if row is None:
        raise NotFound("page", page_id)
    page = queries.get_page_tree(conn, cx.actor.workspace_id, page_id)
    return row["title"], page.nodes


def _outline(nodes: list[Node], depth: int = 0) -> list[str]:
    lines = []
    for node in nodes:
        marker = " [memory]" if node.is_memory else ""
        lines.append(f"{'  ' * depth}- {node.text}{marker} (node:{node.id})")
        lines.extend(_outline(node.children, depth + 1))
    return lines


def kb_read(cx: Context, page_id: UUID) -> str:
    """A visible page as an indented outline; hidden or unknown pages are NotFound."""
    with cx.transaction() as conn:
        title, nodes = _visible_page_tree(cx, conn, page_id)
    return "\n".join([f"# {title or 'Untitled'} (page:{page_id})", *_outline(nodes)])


def kb_node_read(cx: Context, node_id: UUID) -> str:
    """One bullet of a visible page with everything under it."""
    with cx.transaction() as conn:
        node = queries.get_node(conn, cx.actor.workspace_id, node_id)
        title, nodes = _visible_page_tree(cx, conn, node.page_id)
    found = _find(nodes, node_id)
    if found is None:
        raise NotFound("node", node_id)
    return "\n".join([f"# {title or 'Untitled'} (page:{node.page_id})", *_outline([found])])


def _find(nodes: list[Node], node_id: UUID) -> Node | None:
    for node in nodes:
        if node.id == node_id:
            return node
        found = _find(node.children, node_id)
        if found is not None:
            return found
    return None


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
    run: Callable[[Context, EmbeddingProvider | None, BaseModel], str]

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


def _run_search(cx: Context, provider: EmbeddingProvider | None, args: BaseModel) -> str:
    assert isinstance(args, SearchArgs)
    kinds: list[str] | None = None if args.kinds is None else list(args.kinds)
    return kb_search(cx, provider, args.query, kinds=kinds, limit=args.limit, answers=args.answers)


def _run_grep(cx: Context, provider: EmbeddingProvider | None, args: BaseModel) -> str:
    assert isinstance(args, GrepArgs)
    result = kb_grep(cx, args.pattern, regex=args.regex, limit=args.limit, cursor=args.cursor)
    if result.next_cursor is None:
        return result.render()
    # The model can pass back only what it read: the cursor goes into the text.
    return (
        f"{result.render()}\nTo continue, call kb.grep again with the same pattern and "
        f'"cursor": "{result.next_cursor}".'
    )


def _run_read(cx: Context, provider: EmbeddingProvider | None, args: BaseModel) -> str:
    assert isinstance(args, ReadArgs)
    from subspace.agents.refs import read_ref, ref_target  # refs imports this module

    parsed = ref_target(args.ref)
    if parsed is None:
        raise InvalidInput(
            f"ref: {_shown(args.ref)} is not a ref. Give one as kb.search or kb.grep print "
            "them, such as page:<id>, node:<id>, file:<id>:<n> or mail:<id>."
        )
    return read_ref(cx, *parsed)


def _run_node_read(cx: Context, provider: EmbeddingProvider | None, args: BaseModel) -> str:
    assert isinstance(args, NodeReadArgs)
    from subspace.agents.refs import ref_target  # refs imports this module

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
        raise InvalidInput(_describe(spec.name, exc, schema_at)) from None


def call_tool(
    cx: Context,
    provider: EmbeddingProvider | None,
    name: str,
    arguments: dict[str, Any],
    schema_at: str = SCHEMA_IN_DEFINITION,
) -> str:
    """The text an agent reads after calling tool `name` with `arguments` (a JSON object).

    >>> call_tool(cx, provider, "kb.read", {"ref": "page:6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27"})
    '# Runbook (page:6f1c0a4e-...)\\n- Drain the node ...'
    """
    spec = tool_named(name)
    return spec.run(cx, provider, validate_arguments(spec, arguments, schema_at))


def _describe(tool: str, exc: ValidationError, schema_at: str) -> str:
    parts = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error["loc"]) or "arguments"
        message = str(error["msg"])
        if error["type"] == "extra_forbidden":
            message = "is not an argument of this tool"
        parts.append(f"{where}: {message}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return (
        f"Invalid arguments for {tool}: {'; '.join(parts)}{more}. Fix these fields and retry; "
        f"{schema_at}."
    )
