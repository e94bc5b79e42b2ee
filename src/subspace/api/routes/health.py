"""/healthz (the process answers) and /readyz (it can serve: database, schema, pgvector)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from subspace.api.state import database
from subspace.db.migrate import pending_migrations
from subspace.db.pool import Conn, check_pgvector
from subspace.search.lexical.index.layout import database_identity, index_root
from subspace.search.lexical.index.status import lexical_status

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])


class Alive(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: str


class Readiness(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "status": "ready",
                    "checks": {
                        "database": "ok",
                        "pgvector": "0.8.0",
                        "migrations": "at head",
                        "lexical_index": "ok",
                    },
                }
            ]
        }
    )

    status: str = Field(description="`ready`, or `not ready` (with status 503).")
    checks: dict[str, str] = Field(
        description="database, pgvector and migrations, or the error that stopped the checks; "
        "`lexical_index` says `ok`, or `degraded: <why>` while searches rank in Postgres or "
        "the index takes no writes (searches still answer, so the server stays ready)."
    )


@router.get("/healthz", summary="The process answers", response_model=Alive)
async def healthz() -> dict[str, str]:
    # On the event loop, not the worker threads: it answers even when every thread is busy.
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The server can serve: database, pgvector and migrations",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "A check failed; `checks` says which."}},
)
def readyz(request: Request) -> dict[str, Any] | JSONResponse:
    checks: dict[str, str] = {}
    ready = True
    try:
        with database(request).pool.connection(timeout=5) as conn:
            conn.execute("select 1")
            checks["database"] = "ok"
            checks["pgvector"] = check_pgvector(conn)
            pending = pending_migrations(conn)
            checks["migrations"] = "at head" if not pending else f"{len(pending)} pending"
            ready = not pending
            if ready:
                checks["lexical_index"] = _lexical_index(request, conn)
    except Exception as exc:  # readiness reports any failure instead of raising it
        checks["error"] = str(exc)
        ready = False
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    return body if ready else JSONResponse(body, status_code=503)


def _lexical_index(request: Request, conn: Conn) -> str:
    """ "ok", or why searches rank in Postgres or the index takes no writes: searches still
    answer (from Postgres), so this does not make the server unready."""
    settings = request.app.state.settings
    reader = database(request).search_runtime.lexical_reader(
        index_root(settings), lambda: database_identity(conn)
    )
    try:
        problem = lexical_status(conn, settings, reader).problem
    except Exception as exc:  # the index's state is no reason to take the server out
        log.warning("the lexical index's status cannot be read: %s", exc)
        problem = "its status cannot be read"
    return f"degraded: {problem}" if problem else "ok"
