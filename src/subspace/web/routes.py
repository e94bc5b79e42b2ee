"""HTML routes: the shell behind every view's URL (signing in and out: web/signin.py).

The shell is one template; the views inside it (`/p/<id>`, `/files/<id>`, `/mail/<id>` …) are
drawn by the app's JavaScript from the JSON API, so each URL can be reloaded or shared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from subspace import __version__
from subspace.api.auth import COOKIE_NAME, cookie_actor
from subspace.errors import Unauthorized
from subspace.search.options import KIND_ALIASES, KIND_LABELS, KINDS
from subspace.web.signin import set_session_cookie, signin_page

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
OLD_LINK = (
    "Sign-in links no longer carry an API key, which a browser would keep in its history. "
    "Run `subspace signin` on the server for a link with a one-time code, or paste a key below."
)

# Every view of the app; the server answers each with the shell and the script draws the view.
VIEW_PATHS = (
    "/",
    "/p/{page_id}",
    "/files",
    "/files/{file_id}",
    "/mail",
    "/mail/{mail_id}",
    "/sources",
)

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=HERE / "templates")


@router.get("/favicon.ico")
def favicon() -> FileResponse:
    """The icon browsers ask for at this address on every page (an SVG, which they all draw)."""
    return FileResponse(
        STATIC_DIR / "favicon.svg",
        media_type="image/svg+xml",
        headers={"cache-control": "public, max-age=86400"},
    )


def shell(request: Request, token: str | None = None) -> Response:
    """The app's shell for any view, or the sign-in page."""
    if token:  # a link of the kind that carried the key itself
        return signin_page(request, OLD_LINK, status=401)
    try:
        actor = cookie_actor(request)
    except Unauthorized as exc:
        return signin_page(
            request, exc.message if COOKIE_NAME in request.cookies else "", status=401
        )
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
    page = templates.TemplateResponse(request, "shell.html", context)
    set_session_cookie(request, page, request.cookies[COOKIE_NAME])  # moved on with the session
    return page


for _path in VIEW_PATHS:
    router.add_api_route(_path, shell, methods=["GET"], response_class=HTMLResponse)
