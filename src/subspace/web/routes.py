"""HTML routes: the sign-in link and page, signing out, and the shell behind every view's URL.

The shell is one template; the views inside it (`/p/<id>`, `/files/<id>`, `/mail/<id>` …) are
drawn by the app's JavaScript from the JSON API, so each URL can be reloaded or shared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from subspace import __version__
from subspace.api.auth import COOKIE_NAME, presented_key
from subspace.api.state import database
from subspace.errors import Unauthorized
from subspace.keys import authenticate
from subspace.models import Actor
from subspace.search.options import KIND_ALIASES, KIND_LABELS, KINDS

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
COOKIE_MAX_AGE = 30 * 24 * 3600  # a month; revoking the key ends the session sooner

# Every view of the app; the server answers each with the shell and the script draws the view.
VIEW_PATHS = ("/", "/p/{page_id}", "/files", "/files/{file_id}", "/mail", "/mail/{mail_id}")

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=HERE / "templates")


def _signin(request: Request, reason: str = "", status: int = 401) -> HTMLResponse:
    return templates.TemplateResponse(
        request, "signin.html", {"reason": reason, "version": __version__}, status_code=status
    )


def _actor(request: Request, token: str) -> Actor:
    with database(request).request_pool.connection() as conn:
        return authenticate(conn, token)


@router.get("/signin")
def signin_page(request: Request) -> HTMLResponse:
    return _signin(request, status=200)


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    """The icon browsers ask for at this address on every page (an SVG, which they all draw)."""
    return FileResponse(
        STATIC_DIR / "favicon.svg",
        media_type="image/svg+xml",
        headers={"cache-control": "public, max-age=86400"},
    )


@router.post("/signout")
def signout() -> Response:
    """Forget the session cookie. The key itself stays valid until it is revoked."""
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(COOKIE_NAME, httponly=True, samesite="lax")
    return response


def shell(request: Request, token: str | None = None) -> Response:
    """The app's shell for any view, or the sign-in page; `?token=` signs in and redirects."""
    if token:
        try:
            _actor(request, token)
        except Unauthorized:
            return _signin(
                request,
                "This sign-in link is not valid any more: its key was revoked or belongs to "
                "another database.",
            )
        response = RedirectResponse(request.url.path, status_code=303)
        response.set_cookie(
            COOKIE_NAME, token, max_age=COOKIE_MAX_AGE, httponly=True, samesite="lax"
        )
        return response
    key = presented_key(request)
    if not key:
        return _signin(request)
    try:
        actor = _actor(request, key)
    except Unauthorized as exc:
        return _signin(request, exc.message)
    context: dict[str, Any] = {
        "version": __version__,
        "workspace_id": str(actor.workspace_id),
        # The palette's chips and limits come from the one declaration of the search options.
        "search_options": {
            "kinds": [[kind, KIND_LABELS[kind]] for kind in KINDS],
            "aliases": KIND_ALIASES,
            "max_limit": request.app.state.settings.max_search_limit,
        },
    }
    return templates.TemplateResponse(request, "shell.html", context)


for _path in VIEW_PATHS:
    router.add_api_route(_path, shell, methods=["GET"], response_class=HTMLResponse)
