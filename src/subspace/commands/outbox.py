"""Appending events to the outbox, inside the transaction of the command that caused them.
Which item an event is about, each item kind declares (search/kinds.py: ItemSpec.events)."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn

CHANNEL = "subspace_outbox"  # NOTIFY'd with each event's id when its transaction commits


def append_event(conn: Conn, workspace_id: UUID, event: str, **payload: Any) -> int:
    """Append `event` with `payload` to the outbox; return the event id.

    Must be called inside the command's transaction so the event commits with its rows or
    not at all. NOTIFY is delivered only at commit, so a listening indexer wakes for it
    exactly when the rows are visible.
    """
    row = conn.execute(
        "insert into kb.outbox (workspace_id, event, payload) values (%s, %s, %s) returning id",
        (workspace_id, event, json.dumps(payload, default=_jsonable)),
    ).fetchone()
    assert row is not None
    conn.execute("select pg_notify(%s, %s)", (CHANNEL, str(row["id"])))
    return int(row["id"])


def _jsonable(value: object) -> str:
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"cannot put {type(value).__name__} in an outbox event")
