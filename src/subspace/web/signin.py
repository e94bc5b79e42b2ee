"""Signing in and out of the web app: the sign-in page, the code or key it takes, and the
session cookie it sets.

`GET /signin?code=…` (the link `subspace serve` and `subspace signin` print) shows the page
with the code filled in, and a script sends it at once: the code is spent by a POST, so a
program that only fetches links (a chat's preview, a mail scanner) cannot use it up. The
session's own token is the cookie; the API key never is.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from subspace import __version__
from subspace.api.auth import COOKIE_NAME
from subspace.api.state import database
from subspace.config import Settings
from subspace.errors import Unauthorized
from subspace.sessions import end_session_of_token, start_session

MAX_FAILURES = 10  # failed sign-ins one address may make within FAILURE_WINDOW_S
FAILURE_WINDOW_S = 600.0
MAX_CODE_CHARS = 200  # longer than any code or key

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


class FailedSignins:
    """Failed sign-ins per client address over the last FAILURE_WINDOW_S: past MAX_FAILURES
    the address waits until the oldest ages out. Codes are too long to guess; this keeps a
    client from trying keys or codes by the million. Per process (each counts its own)."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def wait_s(self, address: str) -> float:
        """Seconds `address` must wait before it may try again; 0 when it may now."""
        now = time.monotonic()
        with self._lock:
            times = self._failures.get(address)
            while times and times[0] <= now - FAILURE_WINDOW_S:
                times.popleft()
            if not times:
                self._failures.pop(address, None)
                return 0.0
            return 0.0 if len(times) < MAX_FAILURES else times[0] + FAILURE_WINDOW_S - now

    def failed(self, address: str) -> None:
        with self._lock:
            self._failures.setdefault(address, deque()).append(time.monotonic())


def failed_signins(request: Request) -> FailedSignins:
    state = request.app.state
    if getattr(state, "failed_signins", None) is None:
        state.failed_signins = FailedSignins()
    found: FailedSignins = state.failed_signins
    return found


def signin_page(
    request: Request, reason: str = "", status: int = 200, code: str = ""
) -> HTMLResponse:
    """The sign-in page: a field for a code or a key, with `reason` shown above it."""
    return templates.TemplateResponse(
        request,
        "signin.html",
        {"reason": reason, "version": __version__, "code": code},
        status_code=status,
    )


@router.get("/signin")
def show_signin(request: Request, code: str = "") -> HTMLResponse:
    # The code is only shown in the form (and sent by its script); it is spent by the POST.
    return signin_page(request, code=code[:MAX_CODE_CHARS])


@router.post("/signin")
async def signin(request: Request) -> Response:
    """Exchange the form's code (or key) for a session; the cookie holds the session."""
    address = request.client.host if request.client else ""
    limiter = failed_signins(request)
    if not _same_origin(request):
        return signin_page(
            request, "This sign-in came from another site, so it was refused.", status=403
        )
    wait = limiter.wait_s(address)
    if wait:
        minutes = max(1, round(wait / 60))
        response = signin_page(
            request,
            f"Too many failed sign-ins from this address. Try again in about {minutes} "
            "minute" + ("s" if minutes != 1 else "") + ".",
            status=429,
        )
        response.headers["retry-after"] = str(int(wait) + 1)
        return response
    form = await request.form()
    presented = str(form.get("code") or "").strip()[:MAX_CODE_CHARS]
    if not presented:
        return signin_page(request, "Paste a sign-in code or an API key.", status=400)
    settings: Settings = request.app.state.settings
    agent = request.headers.get("user-agent", "")
    try:
        with database(request).request_pool.connection() as conn:
            _, token = start_session(conn, presented, days=settings.session_days, user_agent=agent)
    except Unauthorized as exc:
        limiter.failed(address)
        return signin_page(request, exc.message, status=401)
    signed_in = RedirectResponse("/", status_code=303)
    signed_in.set_cookie(
        COOKIE_NAME,
        token,
        max_age=settings.session_days * 24 * 3600,
        httponly=True,
        samesite="lax",
        secure=is_https(request),
    )
    return signed_in


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


def _same_origin(request: Request) -> bool:
    """A sign-in posted by a page of this server (or by a client sending no Origin): another
    site may not sign a browser in as someone else."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        return True
    parts = urlsplit(source)
    return parts.netloc == request.headers.get("host", "")
