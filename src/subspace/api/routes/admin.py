"""/api/admin: an operator (admin key) creates and lists workspaces and makes their keys."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from subspace.api.auth import require_admin
from subspace.api.bodies import RequestBody
from subspace.api.openapi import KEYED, error_responses
from subspace.context import Context
from subspace.keys import create_key
from subspace.models import ApiKey
from subspace.workspaces import Workspace, create_workspace, list_workspaces, workspace_owner

router = APIRouter(
    prefix="/api/admin", tags=["admin"], responses=error_responses(*KEYED, 403, 404, 409)
)
Admin = Annotated[Context, Depends(require_admin)]


class WorkspaceIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "Acme"}]})

    name: str = Field(description="Unique on the server, ignoring case.")


class KeyIn(RequestBody):
    model_config = ConfigDict(json_schema_extra={"examples": [{"name": "ci"}]})

    name: str = Field("", description="A label to recognise the key by.")


class CreatedKey(BaseModel):
    key: ApiKey
    token: str = Field(description="The secret to send as `Authorization: Bearer`; shown once.")


@router.get("/workspaces")
def list_all_workspaces(cx: Admin) -> list[Workspace]:
    """Every workspace on the server with its counts of bases, items and active keys."""
    with cx.transaction() as conn:
        return list_workspaces(conn)


@router.post("/workspaces", status_code=201)
def create_new_workspace(body: WorkspaceIn, cx: Admin) -> Workspace:
    """A new workspace with its owner and a default knowledge base; 409 if the name is taken."""
    with cx.transaction() as conn:
        actor = create_workspace(conn, body.name)
        return list_workspaces(conn, actor.workspace_id)[0]


@router.post("/workspaces/{workspace_id}/keys", status_code=201)
def create_workspace_key(workspace_id: UUID, body: KeyIn, cx: Admin) -> CreatedKey:
    """An ordinary key acting as the workspace's owner; the token is in this response only."""
    with cx.transaction() as conn:
        key, token = create_key(conn, workspace_owner(conn, workspace_id), body.name)
    return CreatedKey(key=key, token=token)
