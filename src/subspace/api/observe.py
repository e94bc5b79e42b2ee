"""Each HTTP request gets an id (sent back as X-Request-Id), a count and a timing in the
app's metrics, and one log line."""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from subspace.api.metrics import UNMATCHED, Metrics

log = logging.getLogger("subspace.requests")

REQUEST_ID_HEADER = "x-request-id"
# A caller's own id is kept when it is short and plain, so logs of both sides join up; anything
# else (long, or able to forge log lines) is replaced by one of ours.
_CLEAN_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


class RequestObserver:
    """ASGI middleware. With `json_lines`, each request's line is logged at INFO (the server's
    own access log is off); otherwise at DEBUG, since the access log already says it."""

    def __init__(self, app: ASGIApp, metrics: Metrics, json_lines: bool) -> None:
        self.app = app
        self.metrics = metrics
        self.level = logging.INFO if json_lines else logging.DEBUG

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_id(scope) or uuid.uuid4().hex
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500  # what the client gets when the app raises before answering

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message).append("X-Request-Id", request_id)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = _route_template(scope)
            method = str(scope["method"])
            self.metrics.http_requests.labels(method, route, str(status)).inc()
            self.metrics.http_seconds.labels(method, route).observe(seconds)
            if log.isEnabledFor(self.level):
                fields: dict[str, Any] = {
                    "request_id": request_id,
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 2),
                }
                if "search" in state:
                    fields["search"] = state["search"]
                log.log(
                    self.level,
                    "%s %s %s %.1f ms",
                    method,
                    route,
                    status,
                    seconds * 1000,
                    extra={"fields": fields},
                )


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER.encode():
            text = value.decode("latin-1")
            return text if _CLEAN_ID.fullmatch(text) else None
    return None


def _route_template(scope: Scope) -> str:
    """`/api/pages/{page_id}`, not the path: one label per route, however many pages."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else UNMATCHED
