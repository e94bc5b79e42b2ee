"""Cross-site request checks for writes that a browser authenticates with the session cookie.

The cookie is SameSite=Lax, which already keeps it off cross-site POSTs in current browsers;
this check also covers older browsers and same-site attackers (another port or subdomain). A
request carrying its key in a header (`Authorization: Bearer`, `X-API-Key`) is not at risk:
no other site can make a browser send it. Any other request the cookie authenticates is
checked, whatever else it carries.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from subspace.api.auth import uses_cookie
from subspace.api.errors import error_response

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# Paths that check for themselves: signing out only ends the session, and signing in checks
# where the form came from (web/signin.py).
EXEMPT_PATHS = {"/signout", "/signin"}


def same_site(request: Request) -> bool:
    """Whether the request's Origin (or Referer) is this server: the Host it was sent to, or
    SUBSPACE_PUBLIC_URL's address (a proxy in front may rewrite Host)."""
    headers = request.headers
    source = urlsplit(headers.get("origin") or headers.get("referer") or "")
    if source.scheme not in ("http", "https") or not source.netloc:
        return False
    public = urlsplit(request.app.state.settings.public_url)
    return source.netloc == headers.get("host", "") or (
        bool(public.netloc) and (source.scheme, source.netloc) == (public.scheme, public.netloc)
    )


class CrossSiteCheck:
    """Refuse (403) a cookie-authenticated write whose Origin (or Referer) is another site."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] in SAFE_METHODS
            or scope["path"] in EXEMPT_PATHS
        ):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if uses_cookie(request) and not same_site(request):
            response = error_response(
                403,
                "cross_site",
                "This write came from another site (its Origin is not this server), so it "
                "was refused. Use the app itself, or send an API key in Authorization; behind "
                "a proxy, set SUBSPACE_PUBLIC_URL to the address people open.",
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
