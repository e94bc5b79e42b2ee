"""/api/pages"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Response
from pydantic import ConfigDict, TypeAdapter

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.api.positions import READER
from subspace.api.routes.states import add_state_routes
from subspace.context import Context
from subspace.db import queries
from subspace.models import Page, PageSummary

router = APIRouter(prefix="/api/pages", tags=["pages"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]
# A page is written as JSON straight from its dataclasses: FastAPI would validate every bullet
# again on the way out, 0.3-0.4 s of a 10,000-bullet page's 0.6 s (bench/outline.py).
PAGE_JSON = TypeAdapter(Page)


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


@router.get("")
def list_pages(
    cx: CX, kb_id: UUID | None = None, include_hidden: bool = False
) -> list[PageSummary]:
    """Pages newest first, without their bullets; archived and deleted ones too with
    `include_hidden`."""
    with cx.transaction() as conn:
        return queries.list_pages(
            conn, cx.actor.workspace_id, kb_id=kb_id, include_hidden=include_hidden
        )


@router.post("", status_code=201)
def create_page(body: PageIn, cx: CX) -> PageSummary:
    return commands.create_page(cx, body.title, kb_id=body.kb_id)


@router.get("/{page_id}", response_model=Page)
def get_page(page_id: UUID, cx: READER) -> Response:
    """The page with its bullets nested under `nodes`."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        page = Page(**vars(queries.get_page(conn, ws, page_id)))
        written = queries.page_tree_json(conn, ws, page_id, PAGE_JSON.dump_json(page))
    return Response(written, media_type="application/json")


@router.patch("/{page_id}")
def rename_page(page_id: UUID, body: PageRename, cx: CX) -> PageSummary:
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
