"""/healthz (the process answers) and /readyz (it can serve: database, schema, pgvector)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from subspace.api.state import database
from subspace.db.migrate import pending_migrations
from subspace.db.pool import check_pgvector

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    # On the event loop, not the worker threads: it answers even when every thread is busy.
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
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
    except Exception as exc:  # readiness reports any failure instead of raising it
        checks["error"] = str(exc)
        ready = False
    body = {"status": "ready" if ready else "not ready", "checks": checks}
    return body if ready else JSONResponse(body, status_code=503)
