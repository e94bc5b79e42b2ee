"""The context every command and read runs in: a database handle, an actor and the settings."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from uuid import UUID

from psycopg_pool import ConnectionPool, PoolTimeout

from subspace.config import Settings
from subspace.db.pool import Conn
from subspace.floods import NICED_WAIT_S, STEP_ASIDE_S, Precedence
from subspace.models import Actor
from subspace.shares import Shares

# How long a request waits for its workspace's turn at a connection (then 429 or 503): as
# long as it would wait for the pool itself (database.REQUEST_CONNECTION_WAIT_S).
CONNECTION_WAIT_S = 2.0
_turns = threading.local()  # the workspaces whose turn this thread holds

if TYPE_CHECKING:
    from subspace.ingest.isolation import ParserPools


class WriteRetries:
    """How often writes were run again for a lock, and given up, in one Database's life (a
    Database's own, so two apps or two tests never count each other's)."""

    def __init__(self) -> None:
        self.retried = 0
        self.gave_up = 0
        self._lock = threading.Lock()

    def count(self, *, gave_up: bool) -> None:
        with self._lock:
            if gave_up:
                self.gave_up += 1
            else:
                self.retried += 1


@dataclass(frozen=True)
class Context:
    """A pool (each command borrows a connection) or one connection (commands compose).

    With a connection, a command's transaction becomes a savepoint of the caller's, so an
    import can run many commands in one transaction and still have each undo itself alone.
    """

    db: ConnectionPool[Conn] | Conn
    actor: Actor
    settings: Settings
    # The server's request connections, shared fairly among workspaces (database.py); None
    # outside a server.
    connection_shares: Shares | None = None
    # The pool whose backends yield the cores to the others' (niced, database.py): uploads
    # write through it, and so does a workspace flooding the server. Set only beside the
    # primary's request pool (a read on a replica stays there); None: all goes through `db`.
    yielding: ConnectionPool[Conn] | None = None
    # The children that parse mail and extract files (ingest/isolation.py): the Database's.
    parsers: ParserPools | None = None
    # Where the Database counts the writes run again for a lock (commands/retry.py).
    write_retries: WriteRetries | None = None
    # People's requests before a flood's in this process (floods.py): the Database's; None
    # outside a server.
    precedence: Precedence | None = None

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """Yield a connection inside a transaction that commits on success."""
        if isinstance(self.db, ConnectionPool):
            with self._turn(), ExitStack() as stack:
                conn = self._flood_connection(stack)
                if conn is None:
                    conn = stack.enter_context(self.db.connection())
                    if self.db is not self.yielding:  # an upload's is not a person's wait
                        stack.enter_context(self.running())
                with conn.transaction():
                    yield conn
        else:
            with self.db.transaction():
                yield self.db

    @contextmanager
    def _turn(self) -> Iterator[None]:
        """This workspace's turn at a request connection: a thread already holding one for
        it (a command inside another's block) goes on without waiting for a second."""
        workspace = self.actor.workspace_id
        held: set[UUID] = _turns.__dict__.setdefault("workspaces", set())
        if self.connection_shares is None or workspace in held:
            yield
            return
        with self.connection_shares.hold(workspace, CONNECTION_WAIT_S):
            held.add(workspace)
            try:
                yield
            finally:
                held.discard(workspace)

    def _flood_connection(self, stack: ExitStack) -> Conn | None:
        """For a workspace that has asked for more connections than its share for a while
        (floods.py): a connection of the yielding pool, when one is free at once."""
        shares, pool = self.connection_shares, self.yielding
        if shares is None or pool is None or pool is self.db:
            return None
        if not shares.flooding(self.actor.workspace_id):
            return None
        self.step_aside()
        with suppress(PoolTimeout):
            return stack.enter_context(pool.connection(timeout=NICED_WAIT_S))
        return None

    def running(self) -> AbstractContextManager[None]:
        """This workspace's request runs in the block: a flood's checkpoints in this
        process wait for it (floods.Precedence)."""
        if self.precedence is None:
            return nullcontext()
        return self.precedence.running(self.actor.workspace_id)

    def step_aside(self, most_s: float = STEP_ASIDE_S) -> float:
        """A flood's checkpoint: wait, at most `most_s`, while another workspace's request
        runs in this process. The seconds it waited."""
        if self.precedence is None:
            return 0.0
        return self.precedence.step_aside(self.actor.workspace_id, most_s)

    def niced(self) -> Context:
        """The same context on the yielding pool, when there is one and this context borrows
        from a pool: its statements then wait for people's searches in Postgres (an
        upload's, a flood's)."""
        if self.yielding is None or not isinstance(self.db, ConnectionPool):
            return self
        return replace(self, db=self.yielding)

    def on(self, conn: Conn) -> Context:
        """The same context bound to one connection."""
        return replace(self, db=conn)
