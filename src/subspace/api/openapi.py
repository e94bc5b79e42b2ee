"""The API's documentation: error responses declared once, the key's security schemes, the
offline /docs and /redoc pages, and the pinned schema docs/openapi.json (`subspace openapi`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

# Swagger UI and ReDoc as fastapi-offline ships them (MIT; the bundles keep their own
# Apache-2.0 and MIT notices), so the docs pages load nothing from another host.
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSETS_PATH = "/docs-assets"
DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
REGENERATE = "subspace openapi > docs/openapi.json"
# The docs pages may load only from this server, and a page that a browser forbids to reach out
# stays offline whatever its bundle holds. ReDoc's menu shows its maker's logo from a CDN: the
# bundle is served with that address replaced by an empty image, which ReDoc then leaves out.
REDOC_BUNDLE = "redoc.standalone.js"
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
# Inline script starts Swagger UI, both inject inline styles, and ReDoc searches in a worker.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
    "connect-src 'self'; frame-ancestors 'none'"
)


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable and machine-readable: branch on this, not on message.")
    message: str = Field(description="A full sentence for a person, ending with the fix.")
    status: int = Field(description="The HTTP status again.")


class ErrorOut(BaseModel):
    """Every error of the API but the Sim-compatible search (see api/errors.py)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "code": "not_found",
                        "message": "No page with id 3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b "
                        "in this workspace.",
                        "status": 404,
                    }
                }
            ]
        }
    )

    error: ErrorDetail


class SimErrorOut(BaseModel):
    """Every error of POST /api/v1/knowledge/search, in the shape of Sim's knowledge API."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "success": False,
                    "error": "knowledgeBaseIds is empty. Send at least one knowledge base id.",
                }
            ]
        }
    )

    success: bool = False
    error: str


WHY = {
    400: "A paging cursor this server did not issue, or a body that could not be parsed.",
    401: "No API key, or one that is unknown or revoked.",
    403: "The key may not do this (an ordinary key on an operator's route), or a cookie "
    "write came from another site.",
    404: "An id names nothing in the caller's workspace.",
    409: "The write conflicts: a name or Message-ID already taken, or a stale `base_version`.",
    413: "The body or an input is over one of the configured limits.",
    422: "An argument is missing, of the wrong type or out of range; the message names it.",
    429: "The caller already holds as many as it may at once of something the server shares "
    "(event streams, searches, mail parsers); retry after Retry-After.",
    503: "The server is busy (every database connection in use; see Retry-After) or its "
    "database cannot be reached.",
}


def error_responses(*statuses: int, model: type[BaseModel] = ErrorOut) -> dict[int | str, Any]:
    """The `responses=` of a router whose routes may answer these statuses, in `model`'s shape.

    >>> sorted(error_responses(401, 404))
    [401, 404]
    """
    return {status: {"model": model, "description": WHY[status]} for status in statuses}


# Every route that takes a key and reads or writes the caller's workspace.
KEYED = (401, 413, 422, 503)
# ... and reads or writes an item named by its id.
BY_ID = (*KEYED, 404, 409)
SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`subspace keys create`) as `Authorization: Bearer <key>`.",
    },
    "apiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
        "description": "The same key in `X-API-Key`, as clients of other knowledge APIs send it.",
    },
}


def build_schema(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document: FastAPI's, with the key's security schemes on every operation
    that may answer 401, and no 413 or 422 on operations that take no input."""
    schema = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for operations in schema["paths"].values():
        for operation in operations.values():
            responses = operation["responses"]
            if "401" in responses:
                operation["security"] = [{"bearer": []}, {"apiKey": []}]
            if not operation.get("parameters") and "requestBody" not in operation:
                responses.pop("413", None)
                responses.pop("422", None)
            if "requestBody" in operation and "400" not in responses:
                # A body that is not UTF-8, JSON or a form answers 400 (api/errors.py).
                responses["400"] = {
                    "description": WHY[400],
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}
                    },
                }
    return schema


@functools.cache
def _redoc_bundle() -> bytes:
    """ReDoc's bundle without its one outside fetch (a logo), read when first asked for: 1.1 MB
    that an app which never serves /redoc need not read."""
    return (ASSETS_DIR / REDOC_BUNDLE).read_bytes().replace(REDOC_LOGO, b"data:,")


def install_docs(app: FastAPI) -> None:
    """Serve the schema with its security schemes, and /docs and /redoc from shipped assets.

    The pages are documentation: they need no key, as the schema holds no secrets."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_schema(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get(f"{ASSETS_PATH}/{REDOC_BUNDLE}", include_in_schema=False)
    async def redoc_js() -> Response:
        return Response(
            _redoc_bundle(),
            media_type="text/javascript",
            headers={"cache-control": "public, max-age=86400"},
        )

    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            # Off: Swagger UI would otherwise fetch a validity badge from an outside host.
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
        )
        page.headers["content-security-policy"] = DOCS_CSP
        return page

    @app.get(REDOC_PATH, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )
        page.headers["content-security-policy"] = DOCS_CSP
        return page
