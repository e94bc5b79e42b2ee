"""Tag commands: define typed tags in a knowledge base, and tag or untag pages, files and mail."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from subspace.commands.pages import resolve_kb
from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db import queries
from subspace.errors import Conflict, InvalidInput
from subspace.models import ItemKind, TagDefinition, TagType
from subspace.outbox.append import append_event
from subspace.tag_values import coerce_tag_value
from subspace.text import single_line

TAG_TYPES: tuple[TagType, ...] = ("text", "number", "date", "boolean")
TAG_TARGETS: tuple[ItemKind, ...] = ("page", "file", "mail")


@retried
def create_tag(cx: Context, name: str, type: str, *, kb_id: UUID | None = None) -> TagDefinition:
    """Define tag `name` of `type` (text, number, date or boolean) in a knowledge base."""
    name = single_line(
        name, what="A tag name", limit=100, setting="a fixed limit of 100", required=True
    )
    if type not in TAG_TYPES:
        raise InvalidInput(f"Unknown tag type {type!r}. Use one of: {', '.join(TAG_TYPES)}.")
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        row = conn.execute(
            "insert into kb.tag_definitions (workspace_id, kb_id, name, type) "
            "values (%s, %s, %s, %s) on conflict (workspace_id, kb_id, name) do nothing "
            "returning id",
            (ws, kb, name, type),
        ).fetchone()
        if row is None:
            raise Conflict(f"A tag named {name!r} already exists in this knowledge base.")
        append_event(conn, cx.actor.workspace_id, "tag.defined", tag_id=row["id"])
        return queries.get_tag(conn, ws, row["id"])


@retried
def set_tag(cx: Context, tag_id: UUID, target_kind: str, target_id: UUID, value: Any) -> None:
    """Set the value of tag `tag_id` on a page, file or mail of the tag's knowledge base."""
    if target_kind not in TAG_TARGETS:
        raise InvalidInput(f"Cannot tag a {target_kind!r}. Tag one of: {', '.join(TAG_TARGETS)}.")
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        tag = queries.get_tag(conn, ws, tag_id)
        if queries.target_kb(conn, ws, target_kind, target_id) != tag.kb_id:
            raise InvalidInput(
                f"Tag {tag.name!r} belongs to another knowledge base than this {target_kind}. "
                "Define the tag in the item's knowledge base."
            )
        column, coerced = coerce_tag_value(tag, value)
        conn.execute(
            f"insert into kb.tag_values (workspace_id, tag_id, target_kind, target_id, {column}) "
            "values (%s, %s, %s, %s, %s) "
            "on conflict (workspace_id, tag_id, target_kind, target_id) "
            f"do update set {column} = excluded.{column}",
            (ws, tag_id, target_kind, target_id, coerced),
        )
        append_event(
            conn,
            cx.actor.workspace_id,
            "tag.set",
            tag_id=tag_id,
            target_kind=target_kind,
            target_id=target_id,
        )


@retried
def remove_tag(cx: Context, tag_id: UUID, target_kind: str, target_id: UUID) -> bool:
    """Untag the item; return whether it carried the tag."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        queries.get_tag(conn, ws, tag_id)
        cur = conn.execute(
            "delete from kb.tag_values where workspace_id = %s and tag_id = %s "
            "and target_kind = %s and target_id = %s",
            (ws, tag_id, target_kind, target_id),
        )
        append_event(
            conn,
            cx.actor.workspace_id,
            "tag.removed",
            tag_id=tag_id,
            target_kind=target_kind,
            target_id=target_id,
        )
        return cur.rowcount > 0
