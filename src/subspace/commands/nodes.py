"""Node commands: add, edit, move, indent, outdent, delete and set props of bullets."""

from __future__ import annotations

import json
import math
from typing import Any
from uuid import UUID

from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import Conflict, InvalidInput, StalePage
from subspace.models import Node, PageSummary
from subspace.outbox.append import append_event
from subspace.text import bounded, clean_text

MAX_PROPS_BYTES = 64 * 1024  # props hold flags and small metadata, never documents
MAX_PROPS_DEPTH = 32  # objects and lists within props; metadata is flat or nearly


def node_text(cx: Context, text: str) -> str:
    """Bullet text cleaned and checked against SUBSPACE_MAX_NODE_CHARS."""
    return bounded(
        text,
        what="Bullet text",
        limit=cx.settings.max_node_chars,
        setting="SUBSPACE_MAX_NODE_CHARS",
        fix="Split it into several bullets, or upload it as a file.",
    )


def _props(props: dict[str, Any]) -> str:
    if not isinstance(props, dict):
        raise InvalidInput("props must be a JSON object.")
    encoded = json.dumps(_clean_json(props, 1), allow_nan=False)
    if len(encoded) > MAX_PROPS_BYTES:
        raise InvalidInput(f"props are {len(encoded):,} bytes; the limit is {MAX_PROPS_BYTES:,}.")
    return encoded


def _clean_json(value: Any, depth: int) -> Any:
    # jsonb rejects \u0000 and lone surrogates just as text does, and NaN and infinities
    # (which Python's JSON reader accepts, 1e400 included) are not JSON at all.
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput("props hold a number that is not finite (NaN or Infinity). Use null.")
    if isinstance(value, dict | list) and depth > MAX_PROPS_DEPTH:
        raise InvalidInput(
            f"props are nested more than {MAX_PROPS_DEPTH} levels deep; flatten them."
        )
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_json(v, depth + 1) for v in value]
    return value


def _siblings_count(
    conn: Conn, ws: UUID, page_id: UUID, parent_id: UUID | None, exclude: UUID | None
) -> int:
    row = conn.execute(
        "select count(*) as n from kb.nodes where workspace_id = %s and page_id = %s "
        "and parent_id is not distinct from %s and id is distinct from %s",
        (ws, page_id, parent_id, exclude),
    ).fetchone()
    assert row is not None
    return int(row["n"])


def _open_gap(
    conn: Conn,
    ws: UUID,
    page_id: UUID,
    parent_id: UUID | None,
    position: int,
    exclude: UUID | None = None,
) -> None:
    conn.execute(
        "update kb.nodes set position = position + 1 where workspace_id = %s and page_id = %s "
        "and parent_id is not distinct from %s and position >= %s and id is distinct from %s",
        (ws, page_id, parent_id, position, exclude),
    )


def _close_gap(conn: Conn, ws: UUID, page_id: UUID, parent_id: UUID | None, position: int) -> None:
    conn.execute(
        "update kb.nodes set position = position - 1 where workspace_id = %s and page_id = %s "
        "and parent_id is not distinct from %s and position > %s",
        (ws, page_id, parent_id, position),
    )


def _place(
    conn: Conn,
    ws: UUID,
    page_id: UUID,
    parent_id: UUID | None,
    position: int | None,
    exclude: UUID | None = None,
) -> int:
    """Check the parent is on the page and return the slot, clamped to the end.

    `exclude` is a node being moved, which must not count as its own sibling.
    """
    if parent_id is not None:
        parent = queries.get_node(conn, ws, parent_id)
        if parent.page_id != page_id:
            raise InvalidInput(f"Node {parent_id} is on another page; pick a parent on this page.")
    count = _siblings_count(conn, ws, page_id, parent_id, exclude)
    if position is None or position > count:
        return count
    if position < 0:
        raise InvalidInput("position must be 0 or more.")
    return position


def check_base_version(page: PageSummary, base_version: int | None) -> None:
    """Refuse a write made from an older read of the page (None: the caller does not check).

    Call it with the page locked, so no other write can slip in between.
    """
    if base_version is not None and base_version != page.version:
        raise StalePage(
            f"Page {page.id} changed since you read it (you sent base_version {base_version}; "
            f"it is at version {page.version}). Read the page again (GET /api/pages/{page.id}) "
            "and redo the change on the newer version."
        )


def _touch_page(conn: Conn, ws: UUID, page_id: UUID) -> None:
    # The version moves in the writing transaction, under the page's row lock. Called before
    # the bullets are written: every transaction that writes a page and its bullets takes the
    # workspace's text statistics in one order, the page's then the bullets' (as creating a
    # page with bullets does), so two writers never wait on each other in a circle.
    conn.execute(
        "update kb.pages set updated_at = now(), version = version + 1 "
        "where workspace_id = %s and id = %s",
        (ws, page_id),
    )


@retried
def add_node(
    cx: Context,
    page_id: UUID,
    text: str,
    *,
    parent_id: UUID | None = None,
    position: int | None = None,
    props: dict[str, Any] | None = None,
    base_version: int | None = None,
) -> Node:
    """Insert a bullet under `parent_id` (None: top level) at `position` (None: last)."""
    text = node_text(cx, text)
    encoded_props = _props(props or {})
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        page = queries.get_page(conn, ws, page_id, lock=True)
        _refuse_if_deleted(page, "takes no new bullets", "add the bullet")
        check_base_version(page, base_version)
        _touch_page(conn, ws, page_id)
        slot = _place(conn, ws, page_id, parent_id, position)
        _open_gap(conn, ws, page_id, parent_id, slot)
        row = conn.execute(
            "insert into kb.nodes (workspace_id, page_id, parent_id, position, text, props) "
            "values (%s, %s, %s, %s, %s, %s) returning id",
            (ws, page_id, parent_id, slot, text, encoded_props),
        ).fetchone()
        assert row is not None
        append_event(
            conn, cx.actor.workspace_id, "nodes.changed", page_id=page_id, node_ids=[row["id"]]
        )
        return queries.get_node(conn, ws, row["id"])


def _refuse_if_deleted(page: PageSummary, refused: str, then: str) -> None:
    if page.deleted_at is not None:
        raise Conflict(
            f"Page {page.id} is deleted, so it {refused}. Restore the page first "
            f"(POST /api/pages/{page.id}/restore), then {then}."
        )


def _locked_node(cx: Context, conn: Conn, node_id: UUID, base_version: int | None = None) -> Node:
    """The node, re-read with its page locked; Conflict when the page is deleted."""
    ws = cx.actor.workspace_id
    node = queries.get_node(conn, ws, node_id)
    page = queries.get_page(conn, ws, node.page_id, lock=True)
    # A deleted page is kept as it was, so restoring it brings back what was deleted.
    _refuse_if_deleted(page, "takes no changes to its bullets", "make the change")
    check_base_version(page, base_version)
    # Re-read under the page lock: a concurrent move may have changed it.
    return queries.get_node(conn, ws, node_id)


@retried
def edit_node(cx: Context, node_id: UUID, text: str, *, base_version: int | None = None) -> Node:
    """Replace the bullet's text."""
    text = node_text(cx, text)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        node = _locked_node(cx, conn, node_id, base_version)
        _touch_page(conn, ws, node.page_id)
        conn.execute(
            "update kb.nodes set text = %s, updated_at = now() where workspace_id = %s and id = %s",
            (text, ws, node_id),
        )
        append_event(
            conn, cx.actor.workspace_id, "nodes.changed", page_id=node.page_id, node_ids=[node_id]
        )
        return queries.get_node(conn, ws, node_id)


@retried
def set_props(
    cx: Context,
    node_id: UUID,
    props: dict[str, Any],
    *,
    replace: bool = False,
    base_version: int | None = None,
) -> Node:
    """Merge `props` into the node's props (keys set to None are removed), or replace them.

    A node whose `memory` prop is true is a memory item.
    """
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        node = _locked_node(cx, conn, node_id, base_version)
        _touch_page(conn, ws, node.page_id)
        merged = {} if replace else dict(node.props)
        for key, value in props.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        conn.execute(
            "update kb.nodes set props = %s, updated_at = now() "
            "where workspace_id = %s and id = %s",
            (_props(merged), ws, node_id),
        )
        append_event(
            conn, cx.actor.workspace_id, "nodes.changed", page_id=node.page_id, node_ids=[node_id]
        )
        return queries.get_node(conn, ws, node_id)


@retried
def set_memory(cx: Context, node_id: UUID, on: bool) -> Node:
    """Turn the node into a memory item, or back into a plain bullet."""
    return set_props(cx, node_id, {"memory": True if on else None})


def _subtree_ids(conn: Conn, ws: UUID, node_id: UUID) -> list[UUID]:
    rows = conn.execute(
        "with recursive sub as ("
        " select id from kb.nodes where workspace_id = %(ws)s and id = %(id)s"
        " union all"
        " select n.id from kb.nodes n join sub on n.parent_id = sub.id"
        " where n.workspace_id = %(ws)s"
        ") select id from sub",
        {"ws": ws, "id": node_id},
    ).fetchall()
    return [row["id"] for row in rows]


@retried
def move_node(
    cx: Context,
    node_id: UUID,
    *,
    parent_id: UUID | None,
    position: int | None = None,
    base_version: int | None = None,
) -> Node:
    """Move the node (with its subtree) under `parent_id` at `position` on the same page."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        node = _locked_node(cx, conn, node_id, base_version)
        _touch_page(conn, ws, node.page_id)
        if parent_id is not None and parent_id in _subtree_ids(conn, ws, node_id):
            raise Conflict("A node cannot move under itself or one of its descendants.")
        _close_gap(conn, ws, node.page_id, node.parent_id, node.position)
        slot = _place(conn, ws, node.page_id, parent_id, position, exclude=node_id)
        _open_gap(conn, ws, node.page_id, parent_id, slot, exclude=node_id)
        conn.execute(
            "update kb.nodes set parent_id = %s, position = %s, updated_at = now() "
            "where workspace_id = %s and id = %s",
            (parent_id, slot, ws, node_id),
        )
        append_event(
            conn, cx.actor.workspace_id, "nodes.moved", page_id=node.page_id, node_ids=[node_id]
        )
        return queries.get_node(conn, ws, node_id)


@retried
def indent_node(cx: Context, node_id: UUID, *, base_version: int | None = None) -> Node:
    """Make the node the last child of its previous sibling."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        node = _locked_node(cx, conn, node_id, base_version)
        row = conn.execute(
            "select id from kb.nodes where workspace_id = %s and page_id = %s "
            "and parent_id is not distinct from %s and position = %s",
            (ws, node.page_id, node.parent_id, node.position - 1),
        ).fetchone()
        if row is None:
            raise InvalidInput("The first bullet of a list cannot be indented.")
        return move_node(cx.on(conn), node_id, parent_id=row["id"], position=None)


@retried
def outdent_node(cx: Context, node_id: UUID, *, base_version: int | None = None) -> Node:
    """Make the node the next sibling of its parent."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        node = _locked_node(cx, conn, node_id, base_version)
        if node.parent_id is None:
            raise InvalidInput("A top-level bullet cannot be outdented.")
        parent = queries.get_node(conn, ws, node.parent_id)
        return move_node(
            cx.on(conn), node_id, parent_id=parent.parent_id, position=parent.position + 1
        )


@retried
def delete_node(cx: Context, node_id: UUID, *, base_version: int | None = None) -> list[UUID]:
    """Delete the node and its subtree; return the ids deleted."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        node = _locked_node(cx, conn, node_id, base_version)
        _touch_page(conn, ws, node.page_id)
        deleted = _subtree_ids(conn, ws, node_id)
        conn.execute("delete from kb.nodes where workspace_id = %s and id = %s", (ws, node_id))
        _close_gap(conn, ws, node.page_id, node.parent_id, node.position)
        append_event(
            conn,
            cx.actor.workspace_id,
            "nodes.deleted",
            page_id=node.page_id,
            deleted_node_ids=deleted,
        )
        return deleted
