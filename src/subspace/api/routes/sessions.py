"""/api/sessions: the caller's signed-in browsers, which it may end (sign out)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends

from subspace.api.auth import require_context
from subspace.api.openapi import KEYED, error_responses
from subspace.context import Context
from subspace.models import Session
from subspace.sessions import end_session, list_sessions

router = APIRouter(prefix="/api/sessions", tags=["sessions"], responses=error_responses(*KEYED))
CX = Annotated[Context, Depends(require_context)]


@router.get("")
def list_my_sessions(cx: CX) -> list[Session]:
    """The caller's user's signed-in browsers, newest first (ended and expired ones left out)."""
    with cx.transaction() as conn:
        return list_sessions(conn, cx.actor.workspace_id, cx.actor.user_id)


@router.delete("/{session_id}", responses=error_responses(404))
def end_my_session(session_id: UUID, cx: CX) -> Session:
    """Sign a browser out: its cookie answers 401 from now on. Safe to call twice."""
    with cx.transaction() as conn:
        return end_session(conn, cx.actor.workspace_id, session_id, cx.actor.user_id)
