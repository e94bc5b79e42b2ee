"""Round trips: statements queued in psycopg's pipeline mode and read together.

On a connection in pipeline mode a statement is sent only when something is read, along with
every statement queued before it. A search queues all the statements of one step and then
reads them, so a step costs one round trip however many statements it holds. On a connection
not in pipeline mode the same code runs each statement at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, Generic, TypeVar
from weakref import WeakKeyDictionary

import psycopg
from psycopg_pool import ConnectionPool

from subspace.db.pool import Conn

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
Rows = list[dict[str, Any]]


class Later(Generic[T_co]):
    """A result read when first asked for: a queued statement's rows, shaped, or anything
    built from such results."""

    def __init__(self, read: Callable[[], T_co]) -> None:
        self._read: Callable[[], T_co] | None = read
        self._value: T_co | None = None

    def result(self) -> T_co:
        if self._read is not None:
            self._value, self._read = self._read(), None
        return self._value  # type: ignore[return-value]  # set by the first call


# psycopg raises a pipeline's first error wherever it reads it: to a statement's reader,
# though it may belong to a statement queued behind, or to the sending of a later statement
# (it reads the results that have arrived while it sends). It is kept here for the reader of
# the statement it belongs to.
_unclaimed: WeakKeyDictionary[Conn, psycopg.Error] = WeakKeyDictionary()


def send(conn: Conn, sql: str, params: Any = None) -> None:
    """Queue `sql` on `conn`, whose results are not wanted (a savepoint, a setting)."""
    _queue(conn, sql, params)


def _queue(
    conn: Conn, sql: str, params: Any, prepare: bool = False
) -> psycopg.Cursor[Any] | psycopg.Error:
    """`sql` queued on `conn`: its cursor, or, in a pipeline, the error psycopg raised while
    sending it. That error is an earlier statement's (or this one's, if it came that soon),
    read with the results that had arrived: it is kept for that statement's reader."""
    try:
        return conn.execute(sql, params, prepare=prepare or None)
    except psycopg.Error as exc:
        if conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            raise
        _unclaimed.setdefault(conn, exc)
        return exc


def later(
    conn: Conn, sql: str, params: Any, shape: Callable[[Rows], T], *, prepare: bool = False
) -> Later[T]:
    """Queue `sql` on `conn`; `.result()` reads its rows (sending whatever is queued, if
    they have not arrived) and shapes them, or raises the statement's error. With `prepare`,
    the statement is prepared on the connection the first time and reused after (see
    `prepared`).

    Read the results of one batch in the order they were queued: a failed statement aborts
    those behind it, and only the first error is the true one.
    """
    cursor = _queue(conn, sql, params, prepare)
    if isinstance(cursor, psycopg.Error):
        failed = cursor

        def fail() -> T:  # the server skips what follows a failure: this statement too
            raise _unclaimed.pop(conn, failed)

        return Later(fail)

    def read() -> T:
        try:
            found = cursor.fetchall()
        except psycopg.Error as exc:
            result = cursor.pgresult
            if result is None or result.status != psycopg.pq.ExecStatus.TUPLES_OK:
                raise _unclaimed.pop(conn, exc) from None
            _unclaimed[conn] = exc  # this statement's rows came: the error is a later one's
            found = cursor.fetchall()
        return shape(found)

    return Later(read)


def prepared(conn: Conn, sql: str, params: Any, shape: Callable[[Rows], T]) -> Later[T]:
    """`later`, for a statement whose text is the same search after search: each connection
    plans it once (Postgres keeps the plan, and may settle on a generic one), where planning
    a search's statements anew cost some 4.4 ms of a rare word's search (CHANGES.md, "How the
    search figures got here"). Not for a statement whose best plan depends on its values (the
    vector leg's walk)."""
    return later(conn, sql, params, shape, prepare=True)


def flush(conn: Conn) -> None:
    """Have the server send the results of the statements queued so far as soon as it has
    them. In a pipeline Postgres holds results back until it waits for input or a reader asks
    for them, and a reader's request goes behind everything queued: without this, a result
    read while a slower statement queued after it runs (the lexical leg's, while the vector
    leg's walk runs) arrives only when that statement is done."""
    if conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
        conn.pgconn.send_flush_request()  # sent with the next statement, or the next read


@contextmanager
def generic_plans(conn: Conn) -> Iterator[None]:
    """Statements prepared inside the block keep one plan per connection, whatever their
    values. Postgres otherwise plans a statement anew for its values until the generic plan
    looks as cheap, and for rows named by an array of keys it never does: hydration's
    statements were planned at every search (0.4 to 0.6 ms each, docs/benchmarks.md), though
    any set of keys is read the same way. Set for the transaction, and back to the server's
    default after the block, so the vector leg's walk is still planned for its model."""
    send(conn, "set local plan_cache_mode = force_generic_plan")
    try:
        yield
    finally:
        send(conn, "set local plan_cache_mode = default")


def all_rows(found: Rows) -> Rows:
    """The shape of a statement whose rows are wanted as they come."""
    return found


def recover(conn: Conn, savepoint: str) -> None:
    """After a statement failed: let the server skip what was queued behind it (a sync ends
    a failed pipeline's segment) and undo back to `savepoint`, so the transaction goes on."""
    with suppress(psycopg.Error), conn.pipeline():  # leaving a pipeline block syncs
        pass  # (the failure itself was raised to the statement's reader already)
    _unclaimed.pop(conn, None)
    # psycopg forgets every prepared statement on a ROLLBACK and queues DEALLOCATE ALL, which
    # a pipeline then runs among the search's statements; a rollback to a savepoint leaves
    # the statements prepared before it in place, so psycopg is not told of it.
    threshold = conn.prepare_threshold
    conn.prepare_threshold = None
    try:
        conn.execute(f"rollback to savepoint {savepoint}")
        conn.execute(f"release savepoint {savepoint}")
    finally:
        conn.prepare_threshold = threshold


@contextmanager
def pipelined_transaction(
    db: ConnectionPool[Conn] | Conn, wait_s: float | None = None
) -> Iterator[Conn]:
    """A connection in pipeline mode inside one transaction that commits on success.

    From a pool, BEGIN is queued with the first statement and COMMIT with the last ones, read
    when the block ends: the transaction costs no round trip of its own. (psycopg's own
    transaction blocks and implicit BEGIN wait for the server in pipeline mode, so the
    connection runs in autocommit while it sends BEGIN and COMMIT itself.) On a connection
    the caller holds, the block is a savepoint in the caller's transaction. `wait_s`: how long
    to wait for a pool's connection (None: the pool's own timeout).
    """
    if not isinstance(db, ConnectionPool):
        try:
            with db.transaction(), _unprepared(db), db.pipeline():
                yield db
        finally:
            _unclaimed.pop(db, None)
        return
    with db.connection(timeout=wait_s) as conn:
        conn.autocommit = True
        try:
            with _unprepared(conn), conn.pipeline():
                conn.execute("begin")
                yield conn
                conn.execute("commit")
        except BaseException:
            # Undo what the block did; a broken connection is the pool's to discard. The
            # statements prepared before stay prepared (see `recover`).
            with suppress(psycopg.Error):
                if conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    conn.prepare_threshold = None
                    conn.execute("rollback")
            raise
        finally:
            _unclaimed.pop(conn, None)
            with suppress(psycopg.Error):
                conn.autocommit = False


NEVER = 2**31  # executions after which psycopg would prepare a statement on its own


@contextmanager
def _unprepared(conn: Conn) -> Iterator[None]:
    """No statement is prepared on `conn` while the block runs but those asked to be
    (`prepared`): psycopg would otherwise prepare any statement on its fifth execution, the
    vector leg's walk too, whose plan must be made for its own values. (psycopg skips
    preparing when the threshold is None, explicit requests included, hence a threshold no
    count reaches.) A statement prepared in a batch that failed is prepared again when next
    asked: tests/search/test_round_trips.py holds psycopg to it."""
    threshold = conn.prepare_threshold
    conn.prepare_threshold = NEVER
    try:
        yield
    finally:
        conn.prepare_threshold = threshold
