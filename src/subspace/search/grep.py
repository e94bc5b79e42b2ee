"""Grep: every occurrence of a string or a regular expression in the bullets, file text and
mail a workspace may see, scanned table by table in batches within a time limit, with a signed
cursor to continue. Search ranks; grep is exhaustive."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from subspace.context import Context
from subspace.db.pool import Conn
from subspace.errors import InvalidCursor, InvalidInput
from subspace.search import registry
from subspace.search.cursors import seal, unseal, workspace_secret
from subspace.search.options import DEFAULT_GREP_LIMIT, GREP_MAX_RESULTS
from subspace.text import is_clean

GREP_BATCH_ROWS = 5_000  # rows scanned per statement, so a timeout still leaves results
SNIPPET_CHARS = 160
MAX_PATTERN_CHARS = 500
# A grep cursor is a source number and one row key (a uuid, or a uuid and a chunk number):
# under 100 bytes of JSON, about 150 characters signed. Anything longer was not issued here.
MAX_GREP_CURSOR_CHARS = 512
MAX_GREP_CURSOR_INFLATED_BYTES = 256
_GREP_KEY = re.compile(r"[0-9a-f-]{36}(:[0-9]{8})?")


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
class GrepTable:
    """One table grep scans, as SQL over it: a stable key for keyset pagination, the tables
    (the kind's, joined to its item's), the text, the title, the ref, and what is visible."""

    key: str
    tables: str
    text: str
    title: str
    ref: str
    visible: str


def grep_tables() -> tuple[GrepTable, ...]:
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
            GrepTable(key, tables, text, f"{i}.{item.title}", spec.ref_sql(), " and ".join(visible))
        )
    return tuple(found)


def grep(
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
        sources = grep_tables()
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
    source: GrepTable,
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
        or not 0 <= index < len(grep_tables())
        or not isinstance(key, str)
        or not (key == "" or _GREP_KEY.fullmatch(key))
    ):
        raise InvalidCursor("The grep cursor is not valid. Start again without it.")
    return index, key
