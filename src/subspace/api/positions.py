"""Reading your own writes when reads go to replicas (db/replicas.py).

After a request that may have written, the answer carries the primary's WAL position in the
`Subspace-Position` header, and a browser's in a cookie. A read sends it back (the browser by
itself; an API client by repeating the header) and is served by a replica that has replayed
it, or by the primary. Without replicas none of this runs.
"""

from __future__ import annotations

import dataclasses
from http.cookies import SimpleCookie
from typing import Annotated

import anyio
from fastapi import Depends, Request
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from subspace.api.auth import COOKIE_NAME, require_context
from subspace.api.state import database
from subspace.context import Context
from subspace.database import Database
from subspace.db.replicas import parse_lsn
from subspace.errors import InvalidInput
from subspace.search.lexical.index.layout import database_identity, index_root

HEADER = "subspace-position"
COOKIE = "subspace_position"
COOKIE_MAX_AGE_S = 3600  # a replica is seconds behind at worst; an hour is ample
# Requests that change nothing a later read must see, though their method may write.
READ_ONLY = frozenset({"/api/search", "/api/v1/knowledge/search", "/mcp", "/signin", "/signout"})
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def caller_position(request: Request) -> int:
    """The WAL position the caller's last write reached: its header's, or its cookie's."""
    header = request.headers.get(HEADER)
    given = 0
    if header is not None:
        parsed = parse_lsn(header.strip())
        if parsed is None:
            raise InvalidInput(
                f"The {HEADER} header must be a WAL position such as 16/B374D848, as the "
                f"answer to a write gave it; got {header[:40]!r}. Send it back unchanged, "
                "or leave it out."
            )
        given = parsed
    cookie = parse_lsn(request.cookies.get(COOKIE)) or 0  # a browser's: a bad one is ignored
    return max(given, cookie)


def _index_position(db: Database, request: Request) -> int:
    """The WAL position this host's lexical index was read at: a replica behind it lacks
    rows the index's hits name."""
    settings = request.app.state.settings

    def identity() -> str:
        with db.pool.connection() as conn:
            return database_identity(conn)

    reader = db.search_runtime.lexical_reader(index_root(settings), identity)
    position = parse_lsn(reader.held_lsn()) or 0
    if db.replicas is not None:
        db.replicas.saw_primary_at(position)
    return position


def require_read_context(
    request: Request, cx: Annotated[Context, Depends(require_context)]
) -> Context:
    """FastAPI dependency for a search, a grep or a read: the caller's Context, on a replica
    that holds everything it must see when there is one."""
    db = database(request)
    if db.replicas is None:
        return cx
    required = max(_index_position(db, request), caller_position(request))
    pool = db.replicas.pool_for(required)
    # A replica's backends are not this home's to nice: a flood's reads stay as they are.
    return cx if pool is None else dataclasses.replace(cx, db=pool, yielding=None)


READER = Annotated[Context, Depends(require_read_context)]


def _primary_position(db: Database) -> str:
    with db.pool.connection() as conn:
        row = conn.execute("select pg_current_wal_insert_lsn()::text as lsn").fetchone()
    assert row is not None
    if db.replicas is not None:
        db.replicas.saw_primary_at(parse_lsn(row["lsn"]) or 0)
    return str(row["lsn"])


class WritePositions:
    """ASGI middleware: the answer to a request that may have written carries the primary's
    WAL position after it, as a header and, for a browser, a cookie."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in WRITES or scope["path"] in READ_ONLY:
            await self.app(scope, receive, send)
            return
        db: Database | None = getattr(scope["app"].state, "database", None)
        if db is None or db.replicas is None:
            await self.app(scope, receive, send)
            return
        browser = COOKIE_NAME in SimpleCookie(Headers(scope=scope).get("cookie", ""))

        async def send_with_position(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                position = await anyio.to_thread.run_sync(_primary_position, db)
                headers = MutableHeaders(scope=message)
                headers[HEADER] = position
                if browser:
                    headers.append(
                        "set-cookie",
                        f"{COOKIE}={position}; Max-Age={COOKIE_MAX_AGE_S}; Path=/; HttpOnly; "
                        "SameSite=Lax",
                    )
            await send(message)

        await self.app(scope, receive, send_with_position)
