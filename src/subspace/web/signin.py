"""Signing in and out of the web app: the sign-in page, the code or key it takes, and the
session cookie it sets.

`GET /signin?code=…` (the link `subspace serve` and `subspace signin` print) shows the page
with the code filled in and the workspace it opens; its button spends the code. Nothing signs
a browser in by itself: a link another person sent cannot sign you in to their workspace
unseen, nor replace your session. The session's own token is the cookie; the API key never
is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from subspace import __version__
from subspace.api.auth import COOKIE_NAME, cookie_actor
from subspace.api.csrf import same_site
from subspace.api.state import database
from subspace.config import Settings
from subspace.db.pool import Conn
from subspace.errors import Unauthorized
from subspace.keys import KEY_PREFIX
from subspace.sessions import NOT_VALID, end_session_of_token, start_session, workspace_of_code

MAX_FAILURES = 10  # failed sign-ins one address may make within FAILURE_WINDOW_S
FAILURE_WINDOW_S = 600.0
MAX_CODE_CHARS = 200  # longer than any code or key
KEY_IN_LINK = (
    "An API key does not belong in a link, where a browser keeps it in its history: this "
    "one was not used. Paste the key into the field below, and consider revoking it "
    "(`subspace keys revoke`)."
)

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


def wait_after_failures(conn: Conn, address: str) -> float:
    """Seconds `address` must wait before it may try again (0: it may now): past
    MAX_FAILURES failed sign-ins within FAILURE_WINDOW_S, until the oldest of them ages out.
    Codes are too long to guess; this keeps a client from trying keys or codes by the
    million. Counted in Postgres, so every web process of a server counts the same ones."""
    rows = conn.execute(
        "select extract(epoch from failed_at + make_interval(secs => %(window)s) - now()) "
        "as left from server.signin_failures where address = %(address)s "
        "and failed_at > now() - make_interval(secs => %(window)s) "
        "order by failed_at desc limit %(most)s",
        {"address": address, "window": FAILURE_WINDOW_S, "most": MAX_FAILURES},
    ).fetchall()
    return max(0.0, float(rows[-1]["left"])) if len(rows) >= MAX_FAILURES else 0.0


def record_failure(conn: Conn, address: str) -> None:
    """Count a failed sign-in of `address`, and forget every failure past the window."""
    conn.execute(
        "delete from server.signin_failures where failed_at < now() - make_interval(secs => %s)",
        (FAILURE_WINDOW_S,),
    )
    conn.execute("insert into server.signin_failures (address) values (%s)", (address,))


def signin_page(
    request: Request, reason: str = "", status: int = 200, code: str = "",
    workspace: str = "", signed_in: bool = False,
) -> HTMLResponse:  # fmt: skip
    """The sign-in page: a field for a code or a key, with `reason` shown above it; with a
    link's code, the workspace it opens (and that it replaces the browser's session)."""
    context = {"reason": reason, "version": __version__, "code": code, "workspace": workspace,
               "signed_in": signed_in}  # fmt: skip
    return templates.TemplateResponse(request, "signin.html", context, status_code=status)


@router.get("/signin")
def show_signin(request: Request, code: str = "") -> HTMLResponse:
    """The sign-in page; with a link's code, filled in and naming the workspace it opens. The
    code is spent only by the button's POST: a program that fetches links (a chat's preview,
    a mail scanner) cannot use it up, and no page signs a browser in by itself."""
    code = code.strip()[:MAX_CODE_CHARS]
    if code.startswith(f"{KEY_PREFIX}_"):
        return signin_page(request, KEY_IN_LINK, status=400)
    if not code:
        return signin_page(request)
    with database(request).request_pool.connection() as conn:
        workspace = workspace_of_code(conn, code)
    if workspace is None:
        return signin_page(request, NOT_VALID, status=401)
    return signin_page(request, code=code, workspace=workspace, signed_in=_signed_in(request))


@router.post("/signin")
def signin(request: Request, code: Annotated[str, Form()] = "") -> Response:
    """Exchange the form's code (or key) for a session; the cookie holds the session, and a
    session the browser held before ends."""
    address = request.client.host if request.client else ""
    # A browser names the page a form was posted from; a script that names none (curl) is
    # not a browser another site could have made post.
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin and not same_site(request):
        return signin_page(
            request,
            f"This sign-in came from another site ({origin[:200]}, not this server), so it was "
            "refused. Sign in from this server's own sign-in page; behind a proxy, set "
            "SUBSPACE_PUBLIC_URL to the address people open.",
            status=403,
        )
    with database(request).request_pool.connection() as conn:
        wait = wait_after_failures(conn, address)
    if wait:
        minutes = max(1, round(wait / 60))
        refused = signin_page(
            request,
            f"Too many failed sign-ins from this address. Try again in about {minutes} "
            "minute" + ("s" if minutes != 1 else "") + ".",
            status=429,
        )
        refused.headers["retry-after"] = str(int(wait) + 1)
        return refused
    presented = code.strip()[:MAX_CODE_CHARS]
    if not presented:
        return signin_page(request, "Paste a sign-in code or an API key.", status=400)
    settings: Settings = request.app.state.settings
    agent = request.headers.get("user-agent", "")
    try:
        with database(request).request_pool.connection() as conn:
            _, token = start_session(conn, presented, days=settings.session_days, user_agent=agent)
            before = request.cookies.get(COOKIE_NAME)
            if before:
                end_session_of_token(conn, before)
    except Unauthorized as exc:
        with database(request).request_pool.connection() as conn:
            record_failure(conn, address)
        return signin_page(request, exc.message, status=401)
    signed_in = RedirectResponse("/", status_code=303)
    set_session_cookie(request, signed_in, token)
    return signed_in


def set_session_cookie(request: Request, response: Response, token: str) -> None:
    """The session's cookie, for as long as the session lasts unused: set again as it is
    used (by each load of the app), so a browser in use keeps it."""
    settings: Settings = request.app.state.settings
    response.set_cookie(
        COOKIE_NAME,
        token,
        max_age=settings.session_days * 24 * 3600,
        httponly=True,
        samesite="lax",
        secure=is_https(request),
    )


def _signed_in(request: Request) -> bool:
    try:
        cookie_actor(request)
    except Unauthorized:
        return False
    return True


@router.post("/signout")
def signout(request: Request) -> Response:
    """End this browser's session and forget its cookie."""
    token = request.cookies.get(COOKIE_NAME)
    if token:
        with database(request).request_pool.connection() as conn:
            end_session_of_token(conn, token)
    response = RedirectResponse("/signin", status_code=303)
    response.delete_cookie(COOKIE_NAME, httponly=True, samesite="lax", secure=is_https(request))
    return response


def is_https(request: Request) -> bool:
    """Whether the browser reached us over https: directly, through a trusted proxy (its
    X-Forwarded-Proto, SUBSPACE_TRUSTED_PROXIES), or at an https SUBSPACE_PUBLIC_URL."""
    settings: Settings = request.app.state.settings
    return request.url.scheme == "https" or settings.public_url.lower().startswith("https://")
