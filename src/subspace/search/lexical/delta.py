"""The delta: the items written since the engine's position. A search drops the engine's hits
of these items (they may hold text since edited, or be archived since) and ranks their rows
from Postgres instead (search/lexical/sql.py), so a write is found by the very next search.

An outbox event carries its transaction's id (migration 0021); the engine's position is a
snapshot, and the events whose transaction it does not see are the delta.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.search.registry import event_item_sql

# Events after a snapshot: xid8 compares in order, so the index finds the ones from its
# oldest running transaction on, and the snapshot tells which of those it did not see.
AFTER = (
    "o.xid >= pg_snapshot_xmin(%(position)s::pg_snapshot) "
    "and not pg_visible_in_snapshot(o.xid, %(position)s::pg_snapshot)"
)


@dataclass(frozen=True)
class Delta:
    """The items of a workspace written since a position, and how far behind it is."""

    items: frozenset[UUID]
    events: int  # events since the position
    oldest_s: float  # age of the oldest of them, in seconds (0 when none)


def queue_delta(conn: Conn, workspace_id: UUID, position: str) -> Later[Delta]:
    """The workspace's items written since `position` (a snapshot), the statement queued."""
    sql = (
        f"select array_remove(array_agg(distinct {event_item_sql()}), null) as items, "
        "count(*) as events, coalesce(extract(epoch from now() - min(o.created_at)), 0) as age "
        f"from kb.outbox o where o.workspace_id = %(ws)s and {AFTER}"
    )
    return prepared(
        conn,
        sql,
        {"ws": workspace_id, "position": position},
        lambda rows: Delta(
            frozenset(rows[0]["items"] or ()), int(rows[0]["events"]), float(rows[0]["age"])
        ),
    )


@dataclass(frozen=True)
class Behind:
    """How far the engine is behind Postgres, over every workspace."""

    events: int
    oldest_s: float


def behind(conn: Conn, position: str | None) -> Behind | None:
    """The events since `position` in all workspaces; None without a position (no index)."""
    if position is None:
        return None
    row = conn.execute(
        "select count(*) as events, "
        "coalesce(extract(epoch from now() - min(o.created_at)), 0) as age "
        f"from kb.outbox o where {AFTER}",
        {"position": position},
    ).fetchone()
    assert row is not None
    return Behind(int(row["events"]), float(row["age"]))
