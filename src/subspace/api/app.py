"""`create_app(settings)`: the FastAPI application, with no work done at import time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from subspace import __version__
from subspace.api.errors import install_error_handlers
from subspace.api.limits import BodyLimit
from subspace.api.routes import (
    files,
    health,
    home,
    knowledge_bases,
    mail,
    nodes,
    pages,
    tags,
)
from subspace.config import Settings
from subspace.ingest.worker import ExtractionWorker
from subspace.runtime import Database, open_database


def create_app(settings: Settings, database: Database | None = None) -> FastAPI:
    """Build the app. Without `database`, it opens (and on shutdown closes) its own."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = database is None
        app.state.database = open_database(settings) if database is None else database
        extractor = ExtractionWorker(app.state.database, settings)
        extractor.start()
        app.state.extractor = extractor
        try:
            yield
        finally:
            extractor.stop()
            app.state.extractor = None
            if owned:
                app.state.database.close()

    app = FastAPI(
        title="Subspace",
        version=__version__,
        summary="Hybrid search over pages, files and mail.",
        lifespan=lifespan,
        # The interactive docs pages load scripts from a CDN; only the schema is served.
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.extractor = None  # started with the app's lifespan
    if database is not None:
        app.state.database = database
    install_error_handlers(app)
    app.add_middleware(BodyLimit, settings=settings)
    for module in (health, home, knowledge_bases, pages, nodes, files, mail, tags):
        app.include_router(module.router)
    return app
