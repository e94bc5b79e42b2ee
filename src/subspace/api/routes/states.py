"""Archive, delete and restore routes, shared by pages, files and mail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query

from subspace.api.auth import require_context
from subspace.context import Context

Action = Callable[..., Any]  # (cx, item_id) or, for versioned items, (cx, item_id, base_version=)
BaseVersion = Annotated[
    int | None,
    Query(description="The page version the change was made from; an older one answers 409."),
]
CX = Annotated[Context, Depends(require_context)]


def add_state_routes(
    router: APIRouter,
    noun: str,
    model: type,
    *,
    archive: Action,
    delete: Action,
    restore: Action,
    versioned: bool = False,
) -> None:
    """POST /{id}/archive, DELETE /{id} (soft) and POST /{id}/restore for one resource.

    `versioned` items (pages) also take `base_version` and refuse a stale one.
    """

    def route(action: Action) -> Callable[..., Any]:
        if versioned:

            def versioned_endpoint(item_id: UUID, cx: CX, base_version: BaseVersion = None) -> Any:
                return action(cx, item_id, base_version=base_version)

            return versioned_endpoint

        def endpoint(item_id: UUID, cx: CX) -> Any:
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
