"""Who is calling: a Bearer key (or the sign-in cookie of the web UI) becomes a Context."""

from __future__ import annotations

from fastapi import Request

from subspace.api.search_observer import search_observer
from subspace.api.state import database
from subspace.context import Context
from subspace.errors import Unauthorized
from subspace.keys import authenticate, authenticate_admin

COOKIE_NAME = "subspace_key"


def presented_key(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    # Clients written against other knowledge APIs send their key in X-API-Key.
    api_key = request.headers.get("x-api-key", "").strip()
    if api_key:
        return api_key
    return request.cookies.get(COOKIE_NAME)


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
    return db.context(actor, request.app.state.settings, on_search=search_observer(request))


def require_admin(request: Request) -> Context:
    """FastAPI dependency for operator routes: 401 without a valid key, 403 unless it is an
    admin key (`subspace keys create --admin`)."""
    token = _required_key(request)
    db = database(request)
    with db.request_pool.connection() as conn:
        actor = authenticate_admin(conn, token)
    return db.context(actor, request.app.state.settings)
