"""Archive, delete and restore routes, shared by pages, files and mail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends

from subspace.api.auth import require_context
from subspace.context import Context

Action = Callable[[Context, UUID], Any]


def add_state_routes(
    router: APIRouter, noun: str, model: type, *, archive: Action, delete: Action, restore: Action
) -> None:
    """POST /{id}/archive, DELETE /{id} (soft) and POST /{id}/restore for one resource."""

    def route(action: Action) -> Callable[..., Any]:
        def endpoint(item_id: UUID, cx: Annotated[Context, Depends(require_context)]) -> Any:
            return action(cx, item_id)

        return endpoint

    router.add_api_route(
        "/{item_id}/archive",
        route(archive),
        methods=["POST"],
        response_model=model,
        summary=f"Archive a {noun}",
        operation_id=f"archive_{noun}",
    )
    router.add_api_route(
        "/{item_id}",
        route(delete),
        methods=["DELETE"],
        response_model=model,
        summary=f"Soft-delete a {noun}",
        operation_id=f"delete_{noun}",
    )
    router.add_api_route(
        "/{item_id}/restore",
        route(restore),
        methods=["POST"],
        response_model=model,
        summary=f"Restore an archived or deleted {noun}",
        operation_id=f"restore_{noun}",
    )
