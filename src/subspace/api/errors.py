"""One JSON shape for every error: {"error": {"code", "message", "status"}}."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException

from subspace.api.bodies import fields_at
from subspace.commands.retry import WriteContention
from subspace.errors import (
    BadRequest,
    Busy,
    CallerGone,
    Conflict,
    DatabaseError,
    Forbidden,
    InvalidCursor,
    InvalidInput,
    NotFound,
    SubspaceError,
    TooLarge,
    TooMany,
    Unauthorized,
    unknown_field_message,
)

log = logging.getLogger(__name__)

# What a request answers when every database connection it may take is in use.
BUSY_POOL = Busy(
    f"The server is busy: every database connection is in use. Retry in {Busy.retry_after_s} s."
)


# The HTTP status of each of Subspace's errors, chosen here at the edge: the domain's errors
# say what went wrong (errors.py), not how HTTP answers it. The nearest class listed wins
# (a BadRequest is an InvalidInput answered 400, as the Sim-compatible API answers).
STATUSES: dict[type[SubspaceError], int] = {
    SubspaceError: 500,
    DatabaseError: 503,
    InvalidInput: 422,
    BadRequest: 400,
    InvalidCursor: 400,
    Busy: 503,
    WriteContention: 503,
    TooMany: 429,
    CallerGone: 499,  # nginx's "client closed request": no one reads it, the logs do
    TooLarge: 413,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
}


def http_status(exc: SubspaceError) -> int:
    """The status `exc` is answered with."""
    return next(STATUSES[cls] for cls in type(exc).__mro__ if cls in STATUSES)


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, "status": status}}, status_code=status
    )


def error_reply(exc: SubspaceError) -> JSONResponse:
    """The answer to one of Subspace's errors, with Retry-After when it says when to retry."""
    response = error_response(http_status(exc), exc.code, exc.message)
    retry_after = getattr(exc, "retry_after_s", None)
    if retry_after is not None:
        response.headers["Retry-After"] = str(retry_after)
    return response


def describe_invalid(errors: list[dict[str, Any]], body_model: Any, content_type: str) -> str:
    """One sentence for a body that failed validation: a body sent as something else than JSON
    by its Content-Type; an unknown field by name with the fields that exist (`body_model` is
    the route's body); else each wrong field and what it should be."""
    if _body_not_json(errors, content_type):
        sent = content_type.split(";")[0].strip()
        how = f"was sent as {sent}, not JSON" if sent else "has no Content-Type"
        return (
            f"The request body {how}. Send JSON with the header `Content-Type: "
            "application/json` (curl: -H 'content-type: application/json')."
        )
    for error in errors:
        if error.get("type") == "extra_forbidden":
            path = [p for p in error.get("loc", ()) if p != "body"]
            where = ".".join(str(p) for p in path[:-1])
            message = unknown_field_message(str(path[-1]), fields_at(body_model, path[:-1]))
            return message if not where else f"In {where}: {message}"
    for error in errors:
        if error.get("type") == "json_invalid":
            # Its location is a character offset, not a field: "1: JSON decode error" misled.
            loc = error.get("loc", ())
            offset = loc[-1] if isinstance(loc, tuple) and loc else "?"
            ctx = error.get("ctx")
            why = ctx.get("error") if isinstance(ctx, dict) else None
            return (
                f"The request body is not valid JSON (at character {offset}: {why}). "
                "Send a JSON object."
            )
    parts = []
    for error in errors[:5]:
        loc = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
        parts.append(f"{loc or 'body'}: {error.get('msg')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "Invalid request: " + "; ".join(parts) + more + ". Fix these fields and retry."


def _body_not_json(errors: list[dict[str, Any]], content_type: str) -> bool:
    """Whether the whole body failed to be an object because it was not sent as JSON."""
    whole = [e for e in errors if tuple(e.get("loc", ())) == ("body",)]
    return bool(whole) and "json" not in content_type.lower()


def body_model(route: object) -> Any:
    """The model of a route's JSON body, or None."""
    field = getattr(route, "body_field", None)
    return field.field_info.annotation if field is not None else None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SubspaceError)
    async def subspace_error(request: Request, exc: SubspaceError) -> JSONResponse:
        return error_reply(exc)

    @app.exception_handler(PoolTimeout)
    async def pool_timeout(request: Request, exc: PoolTimeout) -> JSONResponse:
        # Every request connection is busy (slow or hostile searches): say so and when to
        # come back, instead of a 500 for a server that is merely full.
        log.warning("no free connection for %s %s: %s", request.method, request.url.path, exc)
        return error_reply(BUSY_POOL)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        message = describe_invalid(
            list(exc.errors()),
            body_model(request.scope.get("route")),
            request.headers.get("content-type", ""),
        )
        return error_response(422, "invalid_input", message)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        message = str(exc.detail)
        if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
            code = "unparsable_body"
            message = "The request body is JSON nested too deeply to read. Send a flatter document."
        elif exc.status_code == 400 and exc.__cause__ is not None:
            # FastAPI's body parser failed on bytes that are not UTF-8 or not a form.
            code = "unparsable_body"
            message = (
                "The request body could not be parsed. Send UTF-8 encoded JSON, or "
                "multipart/form-data for uploads."
            )
        return error_response(exc.status_code, code, message)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal", "Something went wrong on the server; see its log.")
