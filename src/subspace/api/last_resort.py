"""The outermost layer of the app: an error already answered stays answered.

Starlette's ServerErrorMiddleware answers an unexpected exception with a 500 and then raises
it again, so that the server can log it; uvicorn then closes the connection, as it must for
a response cut short. For a 500 sent whole that drop is wrong: a client that keeps its
connection alive sends its next request into a closed socket and gets ECONNRESET instead of
an answer. Here an exception raised after its response went out whole is logged and ends;
one raised before or during the response still reaches the server.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class AnsweredErrors:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = False

        async def watched_send(message: Message) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True

        try:
            await self.app(scope, receive, watched_send)
        except Exception:
            if not answered:
                raise
            # Already logged with its traceback where it was answered (api/errors.py).
            log.debug("%s %s: answered 500", scope["method"], scope["path"])
