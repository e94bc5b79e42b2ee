"""Appending an event inside the transaction of the write that caused it."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.outbox.events import declared_event

CHANNEL = "subspace_outbox"  # NOTIFY'd with each event's id when its transaction commits


def append_event(conn: Conn, workspace_id: UUID, name: str, **payload: Any) -> int:
    """Append the declared event `name` with `payload`; return the event's id.

    Must be called inside the command's transaction so the event commits with its rows or
    not at all. The row names the item the event changes and, when it changed only some,
    which of its rows, so no follower reads the payload to know. NOTIFY is delivered only at
    commit, so a listening follower wakes exactly when the rows are visible.
    """
    event = declared_event(name)
    if unknown := sorted(set(payload) - set(event.payload)):
        raise ValueError(f"event {name!r} carries no {', '.join(unknown)}: see its declaration")
    item_id = rows = None
    if event.item_key is not None:
        if event.item_key not in payload:
            raise ValueError(f"event {name!r} must carry {event.item_key}")
        item_id = UUID(str(payload[event.item_key]))
    if event.rows is not None and event.rows in payload:
        rows = [UUID(str(row)) for row in payload[event.rows]]
    row = conn.execute(
        "insert into kb.outbox (workspace_id, event, payload, item_kind, item_id, item_rows) "
        "values (%s, %s, %s, %s, %s, %s) returning id",
        (workspace_id, name, json.dumps(payload, default=_jsonable), event.item, item_id, rows),
    ).fetchone()
    assert row is not None
    conn.execute("select pg_notify(%s, %s)", (CHANNEL, str(row["id"])))
    return int(row["id"])


def _jsonable(value: object) -> str:
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"cannot put {type(value).__name__} in an outbox event")
