"""The sign-in link (`/?token=…`) and the start page."""

from __future__ import annotations

import html

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from subspace.api.auth import COOKIE_NAME, presented_key
from subspace.api.state import database
from subspace.db import queries
from subspace.errors import Unauthorized
from subspace.keys import authenticate

router = APIRouter(include_in_schema=False)

COOKIE_MAX_AGE = 30 * 24 * 3600  # a month; revoking the key ends the session sooner
SIGN_IN_HELP = (
    "<p>To get a sign-in link, run <code>subspace serve</code>: it prints one when it starts "
    "(<code>http://…/?token=…</code>). Or create a key with <code>subspace keys create</code> "
    "and open <code>/?token=</code> followed by the key.</p>"
)


@router.get("/")
def home(request: Request, token: str | None = None) -> Response:
    db = database(request)
    if token:
        try:
            with db.request_pool.connection() as conn:
                authenticate(conn, token)
        except Unauthorized:
            return HTMLResponse(
                _page(
                    "Sign in",
                    "<p>This sign-in link is not valid any more: its key was revoked or "
                    "belongs to another database.</p>" + SIGN_IN_HELP,
                ),
                status_code=401,
            )
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE_NAME, token, max_age=COOKIE_MAX_AGE, httponly=True, samesite="lax"
        )
        return response
    key = presented_key(request)
    if not key:
        return HTMLResponse(_page("Sign in", SIGN_IN_HELP), status_code=401)
    try:
        with db.request_pool.connection() as conn:
            actor = authenticate(conn, key)
            pages = queries.list_pages(conn, actor.workspace_id)
    except Unauthorized as exc:
        return HTMLResponse(
            _page("Sign in", f"<p>{html.escape(exc.message)}</p>" + SIGN_IN_HELP), 401
        )
    items = "".join(f"<li>{html.escape(p.title or 'Untitled')}</li>" for p in pages)
    return HTMLResponse(
        _page(
            "Subspace",
            f'<h2>Pages</h2><ul>{items}</ul><p>API: <a href="/openapi.json">/openapi.json</a></p>',
        )
    )


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
