"""/api/nodes"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict

from subspace import commands
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.api.routes.states import BaseVersion
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import InvalidInput
from subspace.models import Node

router = APIRouter(prefix="/api/nodes", tags=["nodes"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]


class NodeIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "page_id": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                    "text": "Ship the beta on Friday",
                    "base_version": 4,
                }
            ]
        }
    )

    page_id: UUID
    text: str
    parent_id: UUID | None = None
    position: int | None = None
    props: dict[str, Any] | None = None
    # the page version the change was made from; an older one answers 409 stale_page
    base_version: int | None = None


class NodePatch(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"text": "Ship the beta on Monday", "props": {"done": True}}]
        }
    )

    text: str | None = None
    # merged into the node's props; a key set to null is removed
    props: dict[str, Any] | None = None
    base_version: int | None = None


class NodeMove(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"parent_id": "7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60", "position": 0}]
        }
    )

    parent_id: UUID | None = None
    position: int | None = None
    base_version: int | None = None


@dataclass
class NodeOut(Node):
    """A bullet, and the version of its page after the write (or at the read)."""

    __pydantic_config__ = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                    "page_id": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                    "parent_id": None,
                    "position": 0,
                    "text": "Ship the beta on Friday",
                    "props": {},
                    "created_at": "2026-11-30T09:12:00Z",
                    "updated_at": "2026-11-30T09:12:00Z",
                    "page_version": 5,
                }
            ]
        }
    )

    page_version: int


class Deleted(BaseModel):
    deleted: list[UUID]
    page_version: int


def _out(conn: Conn, cx: Context, node: Node) -> NodeOut:
    # Read in the writing transaction, under its page lock: the version this write made.
    page = queries.get_page(conn, cx.actor.workspace_id, node.page_id)
    return NodeOut(
        **{f.name: getattr(node, f.name) for f in fields(Node)}, page_version=page.version
    )


@router.post("", status_code=201)
def add_node(body: NodeIn, cx: CX) -> NodeOut:
    def add(bound: Context, conn: Conn) -> NodeOut:
        node = commands.add_node(
            bound,
            body.page_id,
            body.text,
            parent_id=body.parent_id,
            position=body.position,
            props=body.props,
            base_version=body.base_version,
        )
        return _out(conn, cx, node)

    return commands.unit_of_work(cx, add)


@router.get("/{node_id}")
def get_node(node_id: UUID, cx: CX) -> NodeOut:
    with cx.transaction() as conn:
        return _out(conn, cx, queries.get_node(conn, cx.actor.workspace_id, node_id))


@router.patch("/{node_id}")
def edit_node(node_id: UUID, body: NodePatch, cx: CX) -> NodeOut:
    """Edit the text and/or merge props, in one transaction."""
    if body.text is None and body.props is None:
        raise InvalidInput("Nothing to change: give `text`, `props` or both.")

    def edit(bound: Context, conn: Conn) -> NodeOut:
        base_version = body.base_version
        if body.text is not None:
            node = commands.edit_node(bound, node_id, body.text, base_version=base_version)
            base_version = None  # checked; the text edit itself moved the version
        if body.props is not None:
            node = commands.set_props(bound, node_id, body.props, base_version=base_version)
        return _out(conn, cx, node)

    return commands.unit_of_work(cx, edit)


@router.post("/{node_id}/move")
def move_node(node_id: UUID, body: NodeMove, cx: CX) -> NodeOut:
    def move(bound: Context, conn: Conn) -> NodeOut:
        node = commands.move_node(
            bound,
            node_id,
            parent_id=body.parent_id,
            position=body.position,
            base_version=body.base_version,
        )
        return _out(conn, cx, node)

    return commands.unit_of_work(cx, move)


@router.post("/{node_id}/indent")
def indent_node(node_id: UUID, cx: CX, base_version: BaseVersion = None) -> NodeOut:
    def indent(bound: Context, conn: Conn) -> NodeOut:
        return _out(conn, cx, commands.indent_node(bound, node_id, base_version=base_version))

    return commands.unit_of_work(cx, indent)


@router.post("/{node_id}/outdent")
def outdent_node(node_id: UUID, cx: CX, base_version: BaseVersion = None) -> NodeOut:
    def outdent(bound: Context, conn: Conn) -> NodeOut:
        return _out(conn, cx, commands.outdent_node(bound, node_id, base_version=base_version))

    return commands.unit_of_work(cx, outdent)


@router.delete("/{node_id}")
def delete_node(node_id: UUID, cx: CX, base_version: BaseVersion = None) -> Deleted:
    """Delete the bullet and everything under it."""

    def delete(bound: Context, conn: Conn) -> Deleted:
        page_id = queries.get_node(conn, cx.actor.workspace_id, node_id).page_id
        deleted = commands.delete_node(bound, node_id, base_version=base_version)
        version = queries.get_page(conn, cx.actor.workspace_id, page_id).version
        return Deleted(deleted=deleted, page_version=version)

    return commands.unit_of_work(cx, delete)
