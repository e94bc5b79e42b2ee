"""The embedding queue: the items whose embeddings wait to be made, taken from the outbox
after the embeddings follower's position (subspace/outbox/reading.py), and left when their
embeddings commit, retried after a failure, or set aside after too many.

Moving events into the queue and moving the position commit together, so an event is in the
queue or after the position, never neither; an item leaves the queue only when no event
newer than the one its reconcile started from came in meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import psycopg

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.indexer.desired import IndexTarget
from subspace.outbox.reading import ITEMS_AFTER, after, current_snapshot

FOLLOWER = "embeddings"  # its row in public.follower_positions
_POSITION = f"(select position from public.follower_positions where follower = '{FOLLOWER}')"

_TAKE = f"""
insert into search.embedding_queue as q
    (workspace_id, item_kind, item_id, events, last_event, first_at, last_at)
select workspace_id, kind, item_id, events, last_event, first_at, last_at from ({ITEMS_AFTER}) a
on conflict (workspace_id, item_kind, item_id) do update set
    events = q.events + excluded.events,
    last_event = greatest(q.last_event, excluded.last_event),
    last_at = greatest(q.last_at, excluded.last_at),
    heal_rank = null
"""


def take_new(conn: Conn) -> int:
    """Move the items the events after the position changed into the queue, and the position
    past them; return how many entries that added or joined. Takes the follower's row lock,
    so two processes never take the same events at once: the second one's transaction fails
    to serialize and takes nothing (0)."""
    try:
        with conn.transaction():
            conn.execute("set transaction isolation level repeatable read")
            row = conn.execute(
                "select position::text as position from public.follower_positions "
                "where follower = %s for update",
                (FOLLOWER,),
            ).fetchone()
            assert row is not None, "migration 0026 records the embeddings follower's position"
            taken = conn.execute(_TAKE, {"position": row["position"]}).rowcount
            conn.execute(
                "update public.follower_positions set position = %s::pg_snapshot, "
                "moved_at = now() where follower = %s",
                (current_snapshot(conn), FOLLOWER),
            )
    except psycopg.errors.SerializationFailure:
        return 0
    return taken


@dataclass(frozen=True)
class Queued:
    """One item waiting for its embeddings."""

    target: IndexTarget
    last_event: int
    events: int
    attempts: int
    oldest_age_ms: float  # since the first event not yet embedded
    newest_age_ms: float  # since the last one


# Workspaces take turns: each one's first item, then each one's second, and so on, so one
# workspace's bulk import holds another's new bullet back by one turn, not by the import.
# Items someone changed come before items queued by the heal (newest and smallest first).
_DUE = """
from (
    select *, row_number() over (
        partition by workspace_id, heal_rank is null order by heal_rank, first_at) as turn
    from search.embedding_queue where retry_at is null or retry_at <= now()) q
order by heal_rank is not null, turn, first_at limit %s
"""


def due(conn: Conn, limit: int) -> list[Queued]:
    """Up to `limit` queued items not waiting for a retry, in the order they are served: the
    workspaces in turn, what someone changed before what the heal queued."""
    return _read(conn, _DUE, (limit,))


def queued(conn: Conn) -> list[Queued]:
    """Every queued item, waiting for a retry or not."""
    return _read(conn, "from search.embedding_queue", ())


def _read(conn: Conn, source: str, params: tuple[object, ...]) -> list[Queued]:
    rows = conn.execute(
        "select workspace_id, item_kind, item_id, last_event, events, attempts, "
        "extract(epoch from now() - first_at) * 1000 as oldest_ms, "
        "extract(epoch from now() - last_at) * 1000 as newest_ms " + source,
        params,
    ).fetchall()
    return [
        Queued(IndexTarget(r["workspace_id"], r["item_kind"], r["item_id"]), r["last_event"],
               r["events"], r["attempts"], float(r["oldest_ms"]), float(r["newest_ms"]))
        for r in rows
    ]  # fmt: skip


def _key(target: IndexTarget) -> tuple[UUID, str, UUID]:
    return target.workspace_id, target.kind, target.item_id


def _entries(queued: Sequence[Queued]) -> tuple[list[UUID], list[str], list[UUID], list[int]]:
    return (
        [q.target.workspace_id for q in queued],
        [q.target.kind for q in queued],
        [q.target.item_id for q in queued],
        [q.last_event for q in queued],
    )


_MATCHING = (
    "unnest(%s::uuid[], %s::text[], %s::uuid[], %s::bigint[]) as d(ws, kind, id, last) "
    "where q.workspace_id = d.ws and q.item_kind = d.kind and q.item_id = d.id"
)


def embedded(conn: Conn, queued: Sequence[Queued]) -> int:
    """Remove the items whose embeddings committed, unless a newer event joined them since
    they were read (the item is then reconciled again); return how many left the queue."""
    if not queued:
        return 0
    return conn.execute(
        f"delete from search.embedding_queue q using {_MATCHING} and q.last_event = d.last",
        _entries(queued),
    ).rowcount


def retry_later(conn: Conn, queued: Queued, error: str, delay_s: float) -> None:
    """Count a failed attempt on the item and wait `delay_s` before the next."""
    conn.execute(
        "update search.embedding_queue set attempts = %s, last_error = %s, "
        "retry_at = now() + make_interval(secs => %s) "
        "where workspace_id = %s and item_kind = %s and item_id = %s",
        (queued.attempts + 1, error, delay_s, *_key(queued.target)),
    )


def set_aside(conn: Conn, queued: Queued, error: str) -> None:
    """Move the item to the dead letters: it failed too often to try again on its own (an
    event about it later queues it afresh)."""
    conn.execute(
        "insert into search.dead_letters as d "
        "(workspace_id, item_kind, item_id, events, error, attempts) "
        "values (%s, %s, %s, %s, %s, %s) on conflict (workspace_id, item_kind, item_id) do "
        "update set events = d.events + excluded.events, error = excluded.error, "
        "attempts = excluded.attempts, failed_at = now()",
        (*_key(queued.target), queued.events, error, queued.attempts + 1),
    )
    conn.execute(
        "delete from search.embedding_queue "
        "where workspace_id = %s and item_kind = %s and item_id = %s and last_event = %s",
        (*_key(queued.target), queued.last_event),
    )


def healing(conn: Conn) -> int:
    """How many items the heal queued are still waiting for their embeddings."""
    row = conn.execute(
        "select count(*) as n from search.embedding_queue where heal_rank is not null"
    ).fetchone()
    return int(row["n"]) if row else 0


def queue_waiting(conn: Conn, workspace_id: UUID) -> Later[int]:
    """How many pages, files and mail of the workspace wait for their embeddings, queued or
    not yet taken from the outbox; the statement queued (read at `.result()`)."""
    return prepared(
        conn,
        "select count(*) as n from ("
        "select item_kind, item_id from search.embedding_queue where workspace_id = %(ws)s "
        "union select o.item_kind, o.item_id from kb.outbox o "
        f"where o.workspace_id = %(ws)s and o.item_id is not null and {after(_POSITION)}) w",
        {"ws": workspace_id},
        lambda rows: int(rows[0]["n"]) if rows else 0,
    )


def waiting(conn: Conn, workspace_id: UUID) -> int:
    """`queue_waiting`, read now."""
    return queue_waiting(conn, workspace_id).result()


@dataclass(frozen=True)
class Backlog:
    """The queue and the events not yet taken into it, over every workspace."""

    events: int  # events whose embeddings are not made yet
    items: int  # the distinct items they are about
    oldest_s: float  # age of the oldest of them
    retrying: int  # events of items waiting for a retry after a failure
    dead_letters: int
    healing: int  # items queued because their vectors under the active model are missing


def backlog(conn: Conn) -> Backlog:
    """Where the queue stands, for `subspace indexer status` and /metrics."""
    row = conn.execute(
        "with w as ("
        "select workspace_id, item_kind, item_id, events, first_at, attempts, heal_rank "
        "from search.embedding_queue union all "
        "select o.workspace_id, o.item_kind, o.item_id, 1, o.created_at, 0, null "
        f"from kb.outbox o where o.item_id is not null and {after(_POSITION)}) "
        "select coalesce(sum(events), 0) as events, "
        "count(distinct (workspace_id, item_kind, item_id)) as items, "
        "coalesce(extract(epoch from now() - min(first_at) filter (where events > 0)), 0) "
        "as oldest, "
        "coalesce(sum(events) filter (where attempts > 0), 0) as retrying, "
        "count(*) filter (where heal_rank is not null) as healing, "
        "(select count(*) from search.dead_letters) as dead from w"
    ).fetchone()
    assert row is not None
    return Backlog(int(row["events"]), int(row["items"]), float(row["oldest"]),
                   int(row["retrying"]), int(row["dead"]), int(row["healing"]))  # fmt: skip
