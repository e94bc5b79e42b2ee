"""Reading the outbox after a position: the one statement every follower reads it with.

A position is a Postgres snapshot. An event carries its transaction's id (migration 0021),
and the events after a position are those whose transaction the snapshot did not see:
unlike an id, a snapshot cannot skip an event whose transaction commits after a later one.
A follower reads in one repeatable-read transaction, applies what it read, and records that
transaction's snapshot as its new position; reading the same events twice changes nothing,
since every follower rewrites an item from its current state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from subspace.db.pool import Conn


def after(position: str) -> str:
    """SQL: the outbox row `o` is after the snapshot the SQL `position` gives. xid8 compares
    in order, so the index finds the events from the snapshot's oldest running transaction
    on, and the snapshot tells which of those it did not see."""
    return (
        f"o.xid >= pg_snapshot_xmin({position}) and not pg_visible_in_snapshot(o.xid, {position})"
    )


AFTER = after("%(position)s::pg_snapshot")  # a position bound as a parameter

# Per item the events after the position changed: how many, the newest's id, when the
# first and last were written, and the rows they named (null when one changed the item
# whole). A follower rewrites items, so the item and not the event is what it reads.
ITEMS_AFTER = f"""
select o.workspace_id, o.item_kind as kind, o.item_id, count(distinct o.id) as events,
    max(o.id) as last_event, min(o.created_at) as first_at, max(o.created_at) as last_at,
    case when bool_or(o.item_rows is null) then null
        else coalesce(array_agg(distinct r.row) filter (where r.row is not null), '{{}}') end
        as rows
from kb.outbox o left join lateral unnest(o.item_rows) as r(row) on true
where o.item_id is not null and {AFTER}
group by o.workspace_id, o.item_kind, o.item_id
"""


@dataclass(frozen=True)
class ItemChanges:
    """What the events after a position changed of one item."""

    workspace_id: UUID
    kind: str  # the item kind: page, file, mail
    item_id: UUID
    rows: frozenset[UUID] | None  # the only rows changed; None when the whole item may have
    events: int
    last_event: int  # the newest event's id
    first_at: datetime
    last_at: datetime


def items_after(conn: Conn, position: str) -> list[ItemChanges]:
    """The items the events after `position` changed, ordered by workspace, kind and id."""
    rows = conn.execute(ITEMS_AFTER + " order by 1, 2, 3", {"position": position}).fetchall()
    return [
        ItemChanges(
            r["workspace_id"], r["kind"], r["item_id"],
            None if r["rows"] is None else frozenset(r["rows"]),
            int(r["events"]), int(r["last_event"]), r["first_at"], r["last_at"],
        )
        for r in rows
    ]  # fmt: skip


def current_snapshot(conn: Conn) -> str:
    """The snapshot of `conn`'s transaction, as a position (in a repeatable-read transaction,
    the one every statement of it reads)."""
    row = conn.execute("select pg_current_snapshot()::text as snapshot").fetchone()
    assert row is not None
    return str(row["snapshot"])


@dataclass(frozen=True)
class Behind:
    """How many events there are after a position, over every workspace, and the age of the
    oldest of them."""

    events: int
    oldest_s: float


def behind(conn: Conn, position: str | None) -> Behind | None:
    """The events after `position` in all workspaces; None without a position."""
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


def current_position(conn: Conn) -> tuple[str, str]:
    """`current_snapshot`, and the WAL position it was taken at or after: on a primary where
    its next record will go, on a replica what it has replayed."""
    row = conn.execute(
        "select pg_current_snapshot()::text as snapshot, (case when pg_is_in_recovery() "
        "then pg_last_wal_replay_lsn() else pg_current_wal_insert_lsn() end)::text as lsn"
    ).fetchone()
    assert row is not None
    return str(row["snapshot"]), str(row["lsn"])
