"""Archive, delete and restore: the visibility markers shared by pages, files and mail."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar
from uuid import UUID

from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db.pool import Conn
from subspace.outbox.append import append_event

T = TypeVar("T")

ARCHIVE = "archived_at = coalesce(archived_at, now())"
DELETE = "deleted_at = coalesce(deleted_at, now())"
RESTORE = "archived_at = null, deleted_at = null"

_TABLES = {"page": "kb.pages", "file": "kb.files", "mail": "kb.mail"}


@retried
def set_state(
    cx: Context,
    kind: str,
    item_id: UUID,
    assignment: str,
    event: str,
    fetch: Callable[[Conn, UUID, UUID], T],
) -> T:
    """Apply `assignment` to one page, file or mail and append `event`; return it re-read.

    `fetch` raises NotFound first, so another workspace's id changes nothing.
    """
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        fetch(conn, ws, item_id)
        conn.execute(
            f"update {_TABLES[kind]} set {assignment}, updated_at = now() "
            "where workspace_id = %s and id = %s",
            (ws, item_id),
        )
        append_event(conn, cx.actor.workspace_id, event, **{f"{kind}_id": item_id})
        return fetch(conn, ws, item_id)
