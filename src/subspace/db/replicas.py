"""Reading from streaming replicas (SUBSPACE_REPLICA_URL): a search, a grep or a read goes to
a replica that has replayed everything its caller must see, and to the primary when none has
within REPLICA_WAIT_S. Writes always go to the primary.

What a caller must see is a WAL position: its own last write's (api/positions.py hands it to
the caller after each write, in a cookie and a response header, and reads it back), and the
position the lexical index was read at (its state records it), so that the index's hits and
the rows a replica holds are of one moment. Positions only grow, so a replica once seen past
a position stays past it: the last replayed position read of each replica is kept, and a
replica is asked again only when that is not far enough.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from subspace.db.pool import Conn, open_pool
from subspace.errors import DatabaseError

log = logging.getLogger(__name__)

REPLICA_WAIT_S = 0.5  # how long a read waits for a replica to replay what it must see
POLL_S = 0.01  # between two looks at a replica's position while waiting
DOWN_S = 5.0  # a replica that failed is left alone this long
REPLAYED = (
    "select (case when pg_is_in_recovery() then pg_last_wal_replay_lsn() "
    "else pg_current_wal_lsn() end)::text as lsn"
)


LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")  # pg_lsn: two 32-bit halves in hex


def parse_lsn(text: str | None) -> int | None:
    """A pg_lsn ("16/B374D848") as a number; None for anything else."""
    if not text or not LSN.fullmatch(text):
        return None
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


class ReplicaPool(ConnectionPool[Conn]):
    """A replica's pool: a connection it cannot give, or one that breaks in use, marks the
    replica down (reads go around it for DOWN_S) and fails that one read with a 503."""

    replica: Replica | None = None

    @contextmanager
    def connection(self, timeout: float | None = None) -> Iterator[Conn]:
        try:
            with super().connection(timeout) as conn:
                try:
                    yield conn
                except psycopg.Error:
                    if conn.broken and self.replica is not None:
                        self.replica.went_down("its connection broke")
                        raise DatabaseError(GONE) from None
                    raise
        except PoolTimeout:
            if self.replica is not None:
                self.replica.went_down("no connection to it opened in time")
            raise DatabaseError(GONE) from None


GONE = (
    "A read replica stopped answering during this read. Retry: reads go to the primary or "
    "another replica meanwhile."
)


@dataclass
class Replica:
    dsn: str
    pool: ConnectionPool[Conn]
    replayed: int = 0  # the last replayed position read of it
    down_until: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def caught_up(self, required: int, *, ask: bool) -> bool:
        """Whether it has replayed `required`; with `ask`, reading its position anew when
        the one known is not far enough. A replica that cannot answer is left alone for
        DOWN_S."""
        if self.replayed >= required or not ask:
            return self.replayed >= required
        try:
            with self.pool.connection(timeout=1) as conn:
                row = conn.execute(REPLAYED).fetchone()
        except (psycopg.Error, OSError, DatabaseError) as exc:
            self.went_down(str(exc))
            return False
        replayed = parse_lsn(row["lsn"] if row else None) or 0
        with self.lock:
            self.replayed = max(self.replayed, replayed)
        return self.replayed >= required

    def went_down(self, why: str) -> None:
        """Leave it alone for DOWN_S, and ask its position anew after."""
        log.warning("the replica %s did not answer (%s); reading elsewhere for %.0f s",
                    _host(self.dsn), why, DOWN_S)  # fmt: skip
        with self.lock:
            self.down_until = time.monotonic() + DOWN_S
            self.replayed = 0


class Replicas:
    """The replicas reads may go to, each with a pool of `pool_size` connections."""

    def __init__(self, dsns: list[str], pool_size: int, wait_s: float = REPLICA_WAIT_S) -> None:
        self.wait_s = wait_s
        self.replicas: list[Replica] = []
        try:
            for dsn in dsns:
                # Not waited for: a replica down when the server starts is read around.
                pool = open_pool(dsn, max_size=pool_size, timeout=2.0, name="subspace-replica",
                                 wait=False, kind=ReplicaPool)  # fmt: skip
                replica = Replica(dsn, pool)
                if isinstance(pool, ReplicaPool):
                    pool.replica = replica
                self.replicas.append(replica)
        except BaseException:
            self.close()
            raise
        self._turns = itertools.count()
        # The newest primary position this process has seen (its writes' answers, the lexical
        # index's state): a read asking for more names a position no replica can reach yet,
        # or one made up, and goes to the primary at once instead of waiting.
        self.primary_seen = 0
        self._seen_lock = threading.Lock()
        self.served = 0  # reads sent to a replica
        self.fell_back = 0  # reads sent to the primary, no replica being far enough in time
        self.unseen = 0  # reads sent to the primary at once, asking past what it has seen

    def pool_for(self, required: int) -> ConnectionPool[Conn] | None:
        """The pool of a replica that has replayed `required` (the replicas in turn), waiting
        up to `wait_s` for one; None when none has: read from the primary."""
        if required > self.primary_seen:
            self.unseen += 1
            return None
        start = next(self._turns)
        order = (
            self.replicas[start % len(self.replicas) :]
            + self.replicas[: start % len(self.replicas)]
        )
        deadline = time.monotonic() + self.wait_s
        ask = False
        while True:
            now = time.monotonic()
            live = [replica for replica in order if replica.down_until <= now]
            for replica in live:
                if replica.caught_up(required, ask=ask):
                    self.served += 1
                    return replica.pool
            if not live or (ask and now >= deadline):  # none to wait for, or waited enough
                self.fell_back += 1
                return None
            if ask:
                time.sleep(POLL_S)
            ask = True

    def saw_primary_at(self, position: int) -> None:
        """The primary was at `position` (or past it) a moment ago."""
        with self._seen_lock:
            self.primary_seen = max(self.primary_seen, position)

    def close(self) -> None:
        """Close every pool. Safe to call twice."""
        for replica in self.replicas:
            replica.pool.close()


def _host(dsn: str) -> str:
    """The replica's address without its credentials, for a log line."""
    return dsn.rsplit("@", 1)[-1]


def parse_replica_urls(value: str) -> list[str]:
    """SUBSPACE_REPLICA_URL: one or more Postgres URLs, separated by commas or spaces."""
    return [part for part in value.replace(",", " ").split() if part]
