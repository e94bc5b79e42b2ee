"""The outbox: appending events inside the transaction of the command that caused them, and
how many items still wait for the indexer. Which item an event is about, each item kind
declares (search/registry.py: ItemSpec.events)."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.search import registry

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


def waiting_for_embeddings(conn: Conn, workspace_id: UUID) -> int:
    """How many pages, files and mail of the workspace have writes not yet embedded."""
    return queue_waiting_for_embeddings(conn, workspace_id).result()


def queue_waiting_for_embeddings(conn: Conn, workspace_id: UUID) -> Later[int]:
    """`waiting_for_embeddings`, its statement queued (read at `.result()`)."""
    return prepared(
        conn,
        f"select count(distinct {registry.event_item_sql()}) as n from kb.outbox o "
        "where o.workspace_id = %s and o.indexed_at is null",
        (workspace_id,),
        lambda rows: int(rows[0]["n"]) if rows else 0,
    )
