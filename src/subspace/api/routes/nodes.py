"""/api/nodes"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from subspace import commands
from subspace.api.auth import require_context
from subspace.context import Context
from subspace.db import queries
from subspace.errors import InvalidInput
from subspace.models import Node

router = APIRouter(prefix="/api/nodes", tags=["nodes"])
CX = Annotated[Context, Depends(require_context)]


class NodeIn(BaseModel):
    page_id: UUID
    text: str
    parent_id: UUID | None = None
    position: int | None = None
    props: dict[str, Any] | None = None


class NodePatch(BaseModel):
    text: str | None = None
    # merged into the node's props; a key set to null is removed
    props: dict[str, Any] | None = None


class NodeMove(BaseModel):
    parent_id: UUID | None = None
    position: int | None = None


class Deleted(BaseModel):
    deleted: list[UUID]


@router.post("", status_code=201)
def add_node(body: NodeIn, cx: CX) -> Node:
    return commands.add_node(
        cx,
        body.page_id,
        body.text,
        parent_id=body.parent_id,
        position=body.position,
        props=body.props,
    )


@router.get("/{node_id}")
def get_node(node_id: UUID, cx: CX) -> Node:
    with cx.transaction() as conn:
        return queries.get_node(conn, cx.actor.workspace_id, node_id)


@router.patch("/{node_id}")
def edit_node(node_id: UUID, body: NodePatch, cx: CX) -> Node:
    """Edit the text and/or merge props, in one transaction."""
    if body.text is None and body.props is None:
        raise InvalidInput("Nothing to change: give `text`, `props` or both.")
    with cx.transaction() as conn:
        bound = cx.on(conn)
        if body.text is not None:
            node = commands.edit_node(bound, node_id, body.text)
        if body.props is not None:
            node = commands.set_props(bound, node_id, body.props)
        return node


@router.post("/{node_id}/move")
def move_node(node_id: UUID, body: NodeMove, cx: CX) -> Node:
    return commands.move_node(cx, node_id, parent_id=body.parent_id, position=body.position)


@router.post("/{node_id}/indent")
def indent_node(node_id: UUID, cx: CX) -> Node:
    return commands.indent_node(cx, node_id)


@router.post("/{node_id}/outdent")
def outdent_node(node_id: UUID, cx: CX) -> Node:
    return commands.outdent_node(cx, node_id)


@router.delete("/{node_id}")
def delete_node(node_id: UUID, cx: CX) -> Deleted:
    """Delete the bullet and everything under it."""
    return Deleted(deleted=commands.delete_node(cx, node_id))
