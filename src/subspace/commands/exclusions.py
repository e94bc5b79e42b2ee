"""Exclusions: a user hides a page, file or mail from their own searches, or brings it back."""

from __future__ import annotations

from uuid import UUID

from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db import queries
from subspace.errors import InvalidInput
from subspace.outbox.append import append_event

EXCLUDABLE = ("page", "file", "mail")


_INSERT = (
    "insert into kb.exclusions (workspace_id, user_id, target_kind, target_id) "
    "values (%s, %s, %s, %s) on conflict do nothing"
)
_DELETE = (
    "delete from kb.exclusions where workspace_id = %s and user_id = %s "
    "and target_kind = %s and target_id = %s"
)


@retried
def _apply(cx: Context, target_kind: str, target_id: UUID, sql: str, event: str) -> None:
    if target_kind not in EXCLUDABLE:
        raise InvalidInput(
            f"Cannot exclude a {target_kind!r}. Exclude one of: {', '.join(EXCLUDABLE)}."
        )
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        queries.target_kb(conn, ws, target_kind, target_id)
        conn.execute(sql, (ws, cx.actor.user_id, target_kind, target_id))
        append_event(
            conn,
            ws,
            event,
            user_id=cx.actor.user_id,
            target_kind=target_kind,
            target_id=target_id,
        )


def exclude(cx: Context, target_kind: str, target_id: UUID) -> None:
    """Hide the item from the acting user's searches, grep, read and RAG. Safe to repeat."""
    _apply(cx, target_kind, target_id, _INSERT, "item.excluded")


def include(cx: Context, target_kind: str, target_id: UUID) -> None:
    """Undo `exclude` for the acting user."""
    _apply(cx, target_kind, target_id, _DELETE, "item.included")
