"""Request body limits, enforced before the body is parsed and while it streams in."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from subspace.api.errors import error_response
from subspace.config import Settings
from subspace.errors import TooLarge

UPLOAD_PATHS = {"/api/files", "/api/mail/import"}
MULTIPART_OVERHEAD = 64 * 1024  # room for the form's boundaries and small fields


class BodyLimit:
    """Answer 413 when a body is over its limit: at once from Content-Length, or as it streams.

    Uploads get the upload limit; every other request the request limit.
    """

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    def _limit(self, scope: Scope) -> tuple[int, str]:
        if scope["method"] == "POST" and scope["path"].rstrip("/") in UPLOAD_PATHS:
            limit = self.settings.max_upload_bytes + MULTIPART_OVERHEAD
            return limit, "SUBSPACE_MAX_UPLOAD_BYTES"
        return self.settings.max_request_bytes, "SUBSPACE_MAX_REQUEST_BYTES"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self._limit(scope)
        message = (
            f"The request body is over the limit of {limit:,} bytes ({setting}). "
            "Send less, or raise the limit."
        )
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await error_response(413, TooLarge.code, message)(scope, receive, send)
                return

        received = 0
        exceeded = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            if exceeded:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                received += len(msg.get("body", b""))
                if received > limit:
                    # Stop reading. The app sees a disconnect and whatever it answers is
                    # replaced by the 413 below (a parser would otherwise turn it into a 400).
                    exceeded = True
                    return {"type": "http.disconnect"}
            return msg

        async def guarded_send(msg: Message) -> None:
            if not exceeded:
                await send(msg)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not exceeded:
                raise
        if exceeded:
            await error_response(413, TooLarge.code, message)(scope, receive, send)
