"""Round trips: statements queued in psycopg's pipeline mode and read together.

On a connection in pipeline mode a statement is sent only when something is read, along with
every statement queued before it. A search queues all the statements of one step and then
reads them, so a step costs one round trip however many statements it holds. On a connection
not in pipeline mode the same code runs each statement at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from subspace.db.pool import Conn

T = TypeVar("T")
Rows = list[dict[str, Any]]


class Later(Generic[T]):
    """A result read when first asked for: a queued statement's rows, shaped, or anything
    built from such results."""

    def __init__(self, read: Callable[[], T]) -> None:
        self._read: Callable[[], T] | None = read
        self._value: T | None = None

    def result(self) -> T:
        if self._read is not None:
            self._value, self._read = self._read(), None
        return self._value  # type: ignore[return-value]  # set by the first call


def later(conn: Conn, sql: str, params: Any, shape: Callable[[Rows], T]) -> Later[T]:
    """Queue `sql` on `conn`; `.result()` reads its rows (sending whatever is queued, if
    they have not arrived) and shapes them."""
    cursor = conn.execute(sql, params)
    return Later(lambda: shape(cursor.fetchall()))


def all_rows(found: Rows) -> Rows:
    """The shape of a statement whose rows are wanted as they come."""
    return found


@contextmanager
def pipelined_transaction(db: ConnectionPool[Conn] | Conn) -> Iterator[Conn]:
    """A connection in pipeline mode inside one transaction that commits on success.

    From a pool, BEGIN is queued with the first statement and COMMIT with the last ones, read
    when the block ends: the transaction costs no round trip of its own. (psycopg's own
    transaction blocks and implicit BEGIN wait for the server in pipeline mode, so the
    connection runs in autocommit while it sends BEGIN and COMMIT itself.) On a connection
    the caller holds, the block is a savepoint in the caller's transaction.
    """
    if not isinstance(db, ConnectionPool):
        with db.transaction(), db.pipeline():
            yield db
        return
    with db.connection() as conn:
        conn.autocommit = True
        try:
            with conn.pipeline():
                conn.execute("begin")
                yield conn
                conn.execute("commit")
        except BaseException:
            if conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("rollback")
            raise
        finally:
            conn.autocommit = False
