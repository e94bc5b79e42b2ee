"""`create_app(settings)`: the FastAPI application, with no work done at import time."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route
from starlette.types import ASGIApp
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from subspace import __version__
from subspace.answers.step_waker import StepWaker
from subspace.api.csrf import CrossSiteCheck
from subspace.api.errors import install_error_handlers
from subspace.api.last_resort import AnsweredErrors
from subspace.api.limits import BodyLimit
from subspace.api.metrics import Metrics
from subspace.api.metrics import router as metrics_router
from subspace.api.metrics_files import SnapshotWriter
from subspace.api.observe import RequestObserver
from subspace.api.openapi import install_docs
from subspace.api.positions import WritePositions
from subspace.api.routes import (
    admin,
    files,
    health,
    knowledge_bases,
    knowledge_search,
    mail,
    nodes,
    pages,
    runs,
    search,
    sessions,
    sources,
    tags,
)
from subspace.api.security_headers import SecurityHeaders
from subspace.background import Background, start_serving
from subspace.config import Settings
from subspace.database import Database, open_database
from subspace.db.locks import SERVER_LOCK_KEY
from subspace.mcp.http import PATH as MCP_PATH
from subspace.mcp.http import McpEndpoint, run_mcp
from subspace.providers.registry import create_provider
from subspace.web import routes as web
from subspace.web import signin


class SubspaceApp(FastAPI):
    """FastAPI with AnsweredErrors outside every other layer, ServerErrorMiddleware too."""

    def build_middleware_stack(self) -> ASGIApp:
        return AnsweredErrors(super().build_middleware_stack())


def create_app(
    settings: Settings, database: Database | None = None, *, background: bool = True
) -> FastAPI:
    """Build the app. Without `database`, it opens (and on shutdown closes) its own. With
    `background`, its lifespan runs the server's background work too; without it (a web
    process of `subspace serve`, whose background work has a process of its own) only the
    waker of its runs' event streams."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = database is None
        db = open_database(settings, yielding=True) if database is None else database
        app.state.database = db
        # A shared lock per server: any number may serve one database, and
        # `subspace reindex` refuses to run while one does.
        server_lock = psycopg.connect(db.dsn, autocommit=True)
        server_lock.execute("select pg_advisory_lock_shared(%s)", (SERVER_LOCK_KEY,))
        if background:
            work = start_serving(db, settings, app.state.provider, app.state.run_engine_options)
        else:
            waker = StepWaker(db.dsn)
            waker.start()
            work = Background(step_waker=waker)
        app.state.extractor = work.extractor
        app.state.step_waker = work.step_waker
        snapshots = None
        if getattr(app.state, "metrics_dir", None) is not None:  # one of several processes
            snapshots = SnapshotWriter(app.state.metrics_dir, app.state.metrics.registry)
            snapshots.start()
        try:
            async with run_mcp(app):
                yield
        finally:
            if snapshots is not None:
                snapshots.stop()
            work.stop()
            app.state.step_waker = None
            app.state.extractor = None
            server_lock.close()
            if owned:
                db.close()

    app = SubspaceApp(
        title="Subspace",
        version=__version__,
        summary="Hybrid search over pages, files and mail.",
        description="Every route under /api takes an API key (`subspace keys create`) as "
        "`Authorization: Bearer <key>` or `X-API-Key: <key>`. Errors answer "
        '`{"error": {"code", "message", "status"}}`; the Sim-compatible search answers '
        '`{"success": false, "error"}`.',
        lifespan=lifespan,
        # Served by install_docs from assets shipped in the package, not from a CDN.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.provider = create_provider(settings)
    app.state.extractor = None  # started with the app's lifespan
    app.state.metrics_dir = None  # where the web processes of one server share their metrics
    # RunEngine's strategies and chat factory, when a test gives its own
    app.state.run_engine_options = {}
    if database is not None:
        app.state.database = database
    install_error_handlers(app)
    install_docs(app)
    app.add_middleware(WritePositions)
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(CrossSiteCheck)
    app.add_middleware(SecurityHeaders)
    # Outermost, so a request refused by the checks above is still counted and logged.
    app.state.metrics = Metrics(app.state)
    app.add_middleware(
        RequestObserver, metrics=app.state.metrics, json_lines=settings.log_format == "json"
    )
    # Outermost of all: the client and scheme a trusted proxy forwarded are what every check,
    # the log and the session cookie's Secure flag see.
    app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=trusted_proxies(settings))
    modules = (
        health,
        knowledge_bases,
        pages,
        nodes,
        files,
        mail,
        tags,
        search,
        runs,
        sessions,
        sources,
        admin,
    )
    for router in (metrics_router, *(module.router for module in modules), knowledge_search.router):
        # The routes as their module built them: include_router() would build every route
        # again for each app (its parameters' and bodies' models), 0.1-0.2 s of the first
        # requests an app answers. The routers declare their prefix, tags and responses
        # themselves, so inclusion would add nothing.
        app.router.routes.extend(router.routes)
    app.router.routes.append(Route(MCP_PATH, McpEndpoint(), methods=["GET", "POST", "DELETE"]))
    app.mount("/static", StaticFiles(directory=web.STATIC_DIR), name="static")
    app.router.routes.extend(signin.router.routes)
    app.router.routes.extend(web.router.routes)
    return app


def trusted_proxies(settings: Settings) -> list[str]:
    """SUBSPACE_TRUSTED_PROXIES as uvicorn's proxy middleware takes it."""
    return [part.strip() for part in settings.trusted_proxies.split(",") if part.strip()]


def pinned_schema() -> str:
    """docs/openapi.json's text: the schema of an app built with default settings (nothing
    from the environment), keys sorted, indented by 2, with a final newline."""
    schema = create_app(Settings(providers="fake")).openapi()
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
