"""/api/knowledge-bases"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Request
from pydantic import ConfigDict

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import KEYED, error_responses
from subspace.context import Context
from subspace.db import queries
from subspace.indexer.queue import waiting
from subspace.indexer.status import embedding_progress
from subspace.models import KnowledgeBase, KnowledgeBaseOverview

router = APIRouter(
    prefix="/api/knowledge-bases",
    tags=["knowledge bases"],
    responses=error_responses(*KEYED, 409),
)
CX = Annotated[Context, Depends(require_context)]


class KnowledgeBaseIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Engineering"}]})

    name: str


@router.get("")
def list_knowledge_bases(cx: CX) -> list[KnowledgeBase]:
    with cx.transaction() as conn:
        return queries.list_knowledge_bases(conn, cx.actor.workspace_id)


@router.post("", status_code=201)
def create_knowledge_base(body: KnowledgeBaseIn, cx: CX) -> KnowledgeBase:
    return commands.create_knowledge_base(cx, body.name)


@router.get("/{kb_id}/overview", responses=error_responses(404))
def knowledge_base_overview(kb_id: UUID, cx: CX, request: Request) -> KnowledgeBaseOverview:
    """What the base holds (live pages, files and mail), how many of the workspace's items
    still wait for their embeddings, and how far its texts are from having vectors of the
    active model: the start view's summary."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        counts = queries.knowledge_base_counts(conn, ws, kb_id)
        pending = waiting(conn, ws)
        model = request.app.state.provider.model
        progress = embedding_progress(conn, model, ws).line if pending else ""
    return KnowledgeBaseOverview(**counts, pending_embeddings=pending, embedding_progress=progress)
