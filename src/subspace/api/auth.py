"""Who is calling: a Bearer key (or the sign-in cookie of the web UI) becomes a Context."""

from __future__ import annotations

from fastapi import Request

from subspace.api.state import database
from subspace.context import Context
from subspace.errors import Unauthorized
from subspace.keys import authenticate, authenticate_admin

COOKIE_NAME = "subspace_key"


def header_key(request: Request) -> str | None:
    """The key sent in a header: `Authorization: Bearer <key>`, or `X-API-Key: <key>` as
    clients written against other knowledge APIs send it."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-api-key", "").strip() or None


def presented_key(request: Request) -> str | None:
    """The key of a header, else the web app's sign-in cookie."""
    return header_key(request) or request.cookies.get(COOKIE_NAME)


def uses_cookie(request: Request) -> bool:
    """Whether the request is authenticated by the cookie, which a browser sends by itself
    (any other header, such as `Authorization: Basic`, leaves the cookie in charge)."""
    return header_key(request) is None and bool(request.cookies.get(COOKIE_NAME))


def _required_key(request: Request) -> str:
    token = presented_key(request)
    if not token:
        raise Unauthorized(
            "No API key. Send `Authorization: Bearer <key>` (or `X-API-Key: <key>`); create a "
            "key with `subspace keys create`."
        )
    return token


def require_context(request: Request) -> Context:
    """FastAPI dependency: the caller's Context, or 401."""
    token = _required_key(request)
    db = database(request)
    # The request pool, not the reserved one: a flood of callers waits (or gets 503) there,
    # and cannot take the connections the indexer and the health checks depend on.
    with db.request_pool.connection() as conn:
        actor = authenticate(conn, token)
    return db.context(actor, request.app.state.settings)


def require_admin(request: Request) -> Context:
    """FastAPI dependency for operator routes: 401 without a valid key, 403 unless it is an
    admin key (`subspace keys create --admin`)."""
    token = _required_key(request)
    db = database(request)
    with db.request_pool.connection() as conn:
        actor = authenticate_admin(conn, token)
    return db.context(actor, request.app.state.settings)
