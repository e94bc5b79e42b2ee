"""Headers every response carries so that a browser treats it as this server meant.

The app's pages run only the scripts and styles the server ships (no inline script, so an
injected `<script>` or `onerror=` does nothing), may not be framed by another site, and are
never sniffed into another type. A route that needs other rules sets its own policy (the
API docs: api/openapi.py), which is kept.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

APP_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",  # frame-ancestors for browsers that predate it
    "referrer-policy": "same-origin",
}


class SecurityHeaders:
    """Add the headers above, and APP_CSP unless the response has a policy of its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers.setdefault(name, value)
                headers.setdefault("content-security-policy", APP_CSP)
            await send(message)

        await self.app(scope, receive, send_with_headers)
