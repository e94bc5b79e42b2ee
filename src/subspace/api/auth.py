"""Who is calling: a Bearer key, or the web app's session cookie, becomes a Context."""

from __future__ import annotations

from fastapi import Request

from subspace.api.state import database
from subspace.context import Context
from subspace.errors import Unauthorized
from subspace.keys import authenticate, authenticate_admin
from subspace.models import Actor
from subspace.sessions import authenticate_session

COOKIE_NAME = "subspace_session"  # a session's token (web/signin.py), never an API key


def header_key(request: Request) -> str | None:
    """The key sent in a header: `Authorization: Bearer <key>`, or `X-API-Key: <key>` as
    clients written against other knowledge APIs send it."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "").strip() or None


def uses_cookie(request: Request) -> bool:
    """Whether the request is authenticated by the cookie, which a browser sends by itself
    (any other header, such as `Authorization: Basic`, leaves the cookie in charge)."""
    return header_key(request) is None and bool(request.cookies.get(COOKIE_NAME))


def cookie_actor(request: Request) -> Actor:
    """The actor of the browser's session; Unauthorized without a live one."""
    token = request.cookies.get(COOKIE_NAME)
    if not token:
        raise Unauthorized("Not signed in. Open a sign-in link (`subspace signin` prints one).")
    days = request.app.state.settings.session_days
    # The request pool, not the reserved one: a flood of callers waits (or gets 503) there,
    # and cannot take the connections the indexer and the health checks depend on.
    with database(request).request_pool.connection() as conn:
        return authenticate_session(conn, token, days=days)


def _actor(request: Request) -> Actor:
    token = header_key(request)
    if token:
        with database(request).request_pool.connection() as conn:
            return authenticate(conn, token)
    if request.cookies.get(COOKIE_NAME):
        return cookie_actor(request)
    raise Unauthorized(
        "No API key. Send `Authorization: Bearer <key>` (or `X-API-Key: <key>`); create a "
        "key with `subspace keys create`."
    )


def require_context(request: Request) -> Context:
    """FastAPI dependency: the caller's Context, or 401."""
    return database(request).context(_actor(request), request.app.state.settings)


def require_admin(request: Request) -> Context:
    """FastAPI dependency for operator routes: 401 without a valid key, 403 unless it is an
    admin key (`subspace keys create --admin`). A browser session is never an operator's."""
    token = header_key(request)
    if not token:
        raise Unauthorized(
            "No API key. Operator routes take an admin key in `Authorization: Bearer <key>`; "
            "create one with `subspace keys create --admin`."
        )
    db = database(request)
    with db.request_pool.connection() as conn:
        actor = authenticate_admin(conn, token)
    return db.context(actor, request.app.state.settings)
