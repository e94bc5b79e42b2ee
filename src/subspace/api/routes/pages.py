"""/api/pages"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.api.routes.states import add_state_routes
from subspace.context import Context
from subspace.db import queries
from subspace.models import Page

router = APIRouter(prefix="/api/pages", tags=["pages"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]


class PageSummary(BaseModel):
    """A page without its bullets: what lists and writes answer. `GET /api/pages/{id}`
    answers the page with its bullets nested under `nodes`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                    "kb_id": "3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b",
                    "title": "Launch plan",
                    "archived_at": None,
                    "deleted_at": None,
                    "created_at": "2026-11-30T09:12:00Z",
                    "updated_at": "2026-11-30T09:40:00Z",
                    "version": 4,
                }
            ]
        }
    )

    id: UUID
    kb_id: UUID
    title: str
    archived_at: datetime | None
    deleted_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int = Field(
        description="Counts the writes to the page and its bullets; send it back as "
        "`base_version` to have a write refused (409 `stale_page`) when another one came first."
    )


class PageIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"title": "Launch plan", "kb_id": "3f2b9c1e-8d4a-4e57-9a0b-6c1d2e3f4a5b"}]
        }
    )

    title: str = ""
    kb_id: UUID | None = None


class PageRename(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"title": "Launch plan (final)", "base_version": 4}]}
    )

    title: str
    base_version: int | None = None


# The writes without a body take the version they were made from as a query parameter.


@router.get("", response_model=list[PageSummary])
def list_pages(cx: CX, kb_id: UUID | None = None, include_hidden: bool = False) -> list[Page]:
    """Pages newest first, without their bullets; archived and deleted ones too with
    `include_hidden`."""
    with cx.transaction() as conn:
        return queries.list_pages(
            conn, cx.actor.workspace_id, kb_id=kb_id, include_hidden=include_hidden
        )


@router.post("", status_code=201, response_model=PageSummary)
def create_page(body: PageIn, cx: CX) -> Page:
    return commands.create_page(cx, body.title, kb_id=body.kb_id)


@router.get("/{page_id}")
def get_page(page_id: UUID, cx: CX) -> Page:
    """The page with its bullets nested under `nodes`."""
    with cx.transaction() as conn:
        return queries.get_page_tree(conn, cx.actor.workspace_id, page_id)


@router.patch("/{page_id}", response_model=PageSummary)
def rename_page(page_id: UUID, body: PageRename, cx: CX) -> Page:
    return commands.rename_page(cx, page_id, body.title, base_version=body.base_version)


add_state_routes(
    router,
    "page",
    PageSummary,
    archive=commands.archive_page,
    delete=commands.delete_page,
    restore=commands.restore_page,
    versioned=True,
)
