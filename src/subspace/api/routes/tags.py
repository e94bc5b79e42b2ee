"""/api/tags and /api/exclusions"""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.context import Context
from subspace.db import queries
from subspace.models import ItemKind, TagDefinition, TagType

router = APIRouter(tags=["tags"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]


class TagIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "due", "type": "date"}]})

    name: str
    type: Literal["text", "number", "date", "boolean"]
    kb_id: UUID | None = None


class TagValueIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"value": "2026-12-24"}]})

    # Dates arrive as "YYYY-MM-DD" strings; the tag's type decides how a value is read.
    value: bool | float | str


class Done(BaseModel):
    ok: bool


class TagValue(BaseModel):
    tag_id: UUID
    name: str
    type: TagType
    value: bool | float | str = Field(description="Dates come as YYYY-MM-DD strings.")


@router.get("/api/tags")
def list_tags(cx: CX, kb_id: UUID | None = None) -> list[TagDefinition]:
    with cx.transaction() as conn:
        return queries.list_tags(conn, cx.actor.workspace_id, kb_id=kb_id)


@router.post("/api/tags", status_code=201)
def create_tag(body: TagIn, cx: CX) -> TagDefinition:
    return commands.create_tag(cx, body.name, body.type, kb_id=body.kb_id)


@router.get("/api/tags/values/{target_kind}/{target_id}")
def list_tag_values(target_kind: ItemKind, target_id: UUID, cx: CX) -> list[TagValue]:
    """The tags set on a page, file or mail, with their values, by tag name."""
    with cx.transaction() as conn:
        rows = queries.list_tag_values(conn, cx.actor.workspace_id, target_kind, target_id)
    return [TagValue(**row) for row in rows]


@router.put("/api/tags/{tag_id}/values/{target_kind}/{target_id}")
def set_tag(tag_id: UUID, target_kind: ItemKind, target_id: UUID, body: TagValueIn, cx: CX) -> Done:
    commands.set_tag(cx, tag_id, target_kind, target_id, body.value)
    return Done(ok=True)


@router.delete("/api/tags/{tag_id}/values/{target_kind}/{target_id}")
def remove_tag(tag_id: UUID, target_kind: ItemKind, target_id: UUID, cx: CX) -> Done:
    return Done(ok=commands.remove_tag(cx, tag_id, target_kind, target_id))


@router.put("/api/exclusions/{target_kind}/{target_id}", tags=["exclusions"])
def exclude(target_kind: ItemKind, target_id: UUID, cx: CX) -> Done:
    """Hide a page, file or mail from your own searches."""
    commands.exclude(cx, target_kind, target_id)
    return Done(ok=True)


@router.delete("/api/exclusions/{target_kind}/{target_id}", tags=["exclusions"])
def include(target_kind: ItemKind, target_id: UUID, cx: CX) -> Done:
    commands.include(cx, target_kind, target_id)
    return Done(ok=True)
