"""Running a kb-command again when Postgres gave up its transaction for a lock.

Two writers that wait on each other's rows (a deadlock), or a transaction that could not be
serialised with another, fail through no fault of their own: run again a moment later, the
same command succeeds. Each kb-command is one transaction, so running it again whole is
safe; one bound to a caller's connection (`cx.on(conn)`) is left to that caller, whose
transaction is the one to run again.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from psycopg import errors
from psycopg_pool import ConnectionPool

from subspace.context import Context
from subspace.db.pool import Conn
from subspace.errors import SubspaceError

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

ATTEMPTS = 4  # the first try and three more
FIRST_PAUSE_S = 0.02  # doubled after each failure, with jitter so the rivals part ways
TRANSIENT = (errors.DeadlockDetected, errors.SerializationFailure)


class WriteContention(SubspaceError):
    """The write met concurrent writes to the same rows on every attempt; nothing was kept."""

    code = "write_contention"
    retry_after_s = 1


def retried(
    command: Callable[Concatenate[Context, P], T],
) -> Callable[Concatenate[Context, P], T]:
    """Run `command` again (up to ATTEMPTS in all) when its transaction fails for a deadlock
    or a serialisation failure; then raise WriteContention (HTTP: 503 with Retry-After)."""

    def run(cx: Context, /, *args: P.args, **kwargs: P.kwargs) -> T:
        if not isinstance(cx.db, ConnectionPool):
            return command(cx, *args, **kwargs)
        pause = FIRST_PAUSE_S
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return command(cx, *args, **kwargs)
            except TRANSIENT as exc:
                gave_up = attempt == ATTEMPTS
                if cx.write_retries is not None:
                    cx.write_retries.count(gave_up=gave_up)
                log.warning(
                    "%s: %s (attempt %d of %d)",
                    command.__name__,
                    type(exc).__name__,
                    attempt,
                    ATTEMPTS,
                )
                if gave_up:
                    raise WriteContention(
                        f"This write met concurrent writes to the same rows {ATTEMPTS} times "
                        f"in a row and was not made. Retry in "
                        f"{WriteContention.retry_after_s} s."
                    ) from exc
                time.sleep(pause * (0.5 + random.random()))
                pause *= 2
        raise AssertionError("unreachable")

    functools.update_wrapper(run, command)
    return run


def unit_of_work(cx: Context, work: Callable[[Context, Conn], T]) -> T:
    """Run `work` in one transaction of its own, committed when it returns, and run it again
    whole (as `retried` runs a kb-command) when Postgres gives the transaction up for a lock.

    For a write made of several commands, or one whose reply is read under the locks the
    write took (a bullet and the page version it made): `work` gets the context bound to the
    transaction, to call commands with, and its connection, to read with.
    """

    def unit(cx: Context) -> T:
        with cx.transaction() as conn:
            return work(cx.on(conn), conn)

    unit.__name__ = getattr(work, "__name__", "unit_of_work")  # what a retry logs
    return retried(unit)(cx)
