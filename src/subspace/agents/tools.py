"""The agent tools, as plain functions over the same search, grep and read code.

`kb.search` ranks (the hybrid search), `kb.grep` finds every occurrence (an exhaustive scan),
`kb.read` and `kb.node.read` fetch whole pages and subtrees once a target is known. All are
reads, so none needs approval. Output is compact text with refs an agent can cite.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg

from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import InvalidInput, NotFound
from subspace.models import Node
from subspace.providers.base import EmbeddingProvider
from subspace.search.filters import file_visible, mail_visible, page_visible
from subspace.search.service import SearchRequest, search

SEARCH_TOOL_LIMIT = 10
GREP_BATCH_ROWS = 5_000  # rows scanned per statement, so a timeout still leaves results
GREP_MAX_RESULTS = 500
SNIPPET_CHARS = 160
MAX_PATTERN_CHARS = 500


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    needs_approval: bool


TOOLS = (
    ToolSpec("kb.search", "Hybrid search over pages, bullets, memory, files and mail; "
             "returns up to 10 ranked hits with refs.", needs_approval=False),
    ToolSpec("kb.grep", "Every occurrence of an exact string or a regex in bullets, file "
             "text and mail, exhaustively, page by page.", needs_approval=False),
    ToolSpec("kb.read", "A whole page as an indented outline, with node refs.",
             needs_approval=False),
    ToolSpec("kb.node.read", "One bullet and everything under it.", needs_approval=False),
)  # fmt: skip


def kb_search(
    cx: Context,
    provider: EmbeddingProvider | None,
    query: str,
    *,
    kinds: list[str] | None = None,
    limit: int = SEARCH_TOOL_LIMIT,
) -> str:
    """Ranked hits as text, one per line: type, title › breadcrumb, passage, and ref."""
    response = search(
        cx, provider, SearchRequest(query=query, kinds=kinds, limit=min(limit, SEARCH_TOOL_LIMIT))
    )
    lines = []
    for number, row in enumerate(response.rows, start=1):
        place = " › ".join(row.breadcrumb) if row.breadcrumb else row.title
        passage = " ".join(row.passage.split())
        lines.append(f"{number}. [{row.type}] {place} — {passage} ({row.ref})")
    if not lines:
        lines.append("No results.")
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


# The sources grep scans, in order, each with a stable key for keyset pagination.
_GREP_SOURCES = (
    ("node", "n.id::text", "kb.nodes n join kb.pages p on p.workspace_id = n.workspace_id "
     "and p.id = n.page_id", "n.text", "p.title", "'node:' || n.id",
     f"n.workspace_id = %(ws)s and {page_visible('p')}"),
    ("file", "c.file_id::text || ':' || lpad(c.n::text, 8, '0')",
     "search.file_chunks c join kb.files f on f.workspace_id = c.workspace_id "
     "and f.id = c.file_id", "c.text", "f.name", "'file:' || c.file_id || ':' || c.n",
     f"c.workspace_id = %(ws)s and c.enabled and {file_visible('f')}"),
    ("mail", "m.id::text", "kb.mail m", "m.subject || E'\\n' || m.body_text", "m.subject",
     "'mail:' || m.id", f"m.workspace_id = %(ws)s and {mail_visible('m')}"),
)  # fmt: skip


def kb_grep(
    cx: Context, pattern: str, *, regex: bool = False, limit: int = 100, cursor: str | None = None
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
    if "\x00" in pattern:
        raise InvalidInput("The pattern contains a NUL byte; remove it.")
    limit = max(1, min(limit, GREP_MAX_RESULTS))
    source_index, last_key = _decode_grep_cursor(cursor)
    deadline = time.monotonic() + cx.settings.grep_timeout_ms / 1000
    result = GrepResult()
    with cx.transaction() as conn:
        while source_index < len(_GREP_SOURCES):
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            if remaining_ms <= 0:
                return _stopped(result, source_index, last_key, cx, timed_out=True)
            try:
                rows, scanned_to = _grep_batch(
                    conn, cx, _GREP_SOURCES[source_index], pattern, regex, last_key, remaining_ms
                )
            except psycopg.errors.QueryCanceled:
                return _stopped(result, source_index, last_key, cx, timed_out=True)
            except psycopg.errors.InvalidRegularExpression as exc:
                raise InvalidInput(f"The regex is not valid: {exc}. Fix it and retry.") from None
            for row in rows:
                result.matches.append(GrepMatch(row["ref"], row["title"], row["snippet"],
                                                int(row["count"])))  # fmt: skip
                if len(result.matches) >= limit:
                    result.capped = True
                    return _stopped(result, source_index, row["key"], cx, timed_out=False)
            if scanned_to is None:
                source_index, last_key = source_index + 1, ""
            else:
                last_key = scanned_to
    return result


def _grep_batch(
    conn: Conn,
    cx: Context,
    source: tuple[str, ...],
    pattern: str,
    regex: bool,
    after: str,
    timeout_ms: int,
) -> tuple[list[dict[str, Any]], str | None]:
    """Scan one batch of a source after key `after`; return its matches and the last key
    scanned (None when the source is exhausted)."""
    _, key, tables, text, title, ref, visible = source
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
            f"select key, ref, title, substr(body, greatest(1, {position} - 60), "
            f"{SNIPPET_CHARS}) as snippet, {count} as count, {test} as hit, "
            "max(key) over () as last_key, count(*) over () as scanned from batch order by key",
            {"ws": cx.actor.workspace_id, "user": cx.actor.user_id, "p": pattern, "after": after},
        ).fetchall()
    if not rows:
        return [], None
    last = str(rows[0]["last_key"])
    exhausted = int(rows[0]["scanned"]) < GREP_BATCH_ROWS
    matches = [r for r in rows if r["hit"]]
    for match in matches:
        match["snippet"] = " ".join(str(match["snippet"]).split())
    return matches, None if exhausted else last


def _stopped(
    result: GrepResult, source_index: int, key: str, cx: Context, *, timed_out: bool
) -> GrepResult:
    result.timed_out = timed_out
    result.next_cursor = base64.urlsafe_b64encode(json.dumps([source_index, key]).encode()).decode()
    if timed_out:
        result.message = (
            f"Stopped at the {cx.settings.grep_timeout_ms:,} ms limit (SUBSPACE_GREP_TIMEOUT_MS):"
            " the results above are incomplete. Continue with the cursor, or narrow the pattern."
        )
    else:
        result.message = "Stopped at the result limit; continue with the cursor for more."
    return result


def _decode_grep_cursor(cursor: str | None) -> tuple[int, str]:
    if not cursor:
        return 0, ""
    try:
        index, key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return int(index), str(key)
    except (ValueError, TypeError):
        raise InvalidInput("The grep cursor is not valid. Start again without it.") from None


def _visible_page_tree(cx: Context, conn: Conn, page_id: UUID) -> tuple[str, list[Node]]:
    row = conn.execute(
        f"select title from kb.pages p where p.workspace_id = %(ws)s and p.id = %(id)s "
        f"and {page_visible('p')}",
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
