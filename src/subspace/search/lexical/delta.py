"""The delta: the items written since the engine's position. A search drops the engine's hits
of these items (they may hold text since edited, or be archived since) and ranks their rows
from Postgres instead (search/lexical/sql.py), so a write is found by the very next search.
The events after the position are read as every follower reads them (outbox/reading.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.outbox.reading import AFTER


@dataclass(frozen=True)
class Delta:
    """The items of a workspace written since a position, and how far behind it is."""

    items: frozenset[UUID]
    events: int  # events since the position
    oldest_s: float  # age of the oldest of them, in seconds (0 when none)


def queue_delta(conn: Conn, workspace_id: UUID, position: str) -> Later[Delta]:
    """The workspace's items written since `position` (a snapshot), the statement queued."""
    sql = (
        "select array_remove(array_agg(distinct o.item_id), null) as items, "
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
