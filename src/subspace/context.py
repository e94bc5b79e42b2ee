"""The context every command and read runs in: a database handle, an actor and the settings."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from subspace.config import Settings
from subspace.db.pool import Conn
from subspace.models import Actor

if TYPE_CHECKING:
    from subspace.search.runtime import SearchRuntime
    from subspace.search.service import SearchResponse


@dataclass(frozen=True)
class Context:
    """A pool (each command borrows a connection) or one connection (commands compose).

    With a connection, a command's transaction becomes a savepoint of the caller's, so an
    import can run many commands in one transaction and still have each undo itself alone.
    """

    db: ConnectionPool[Conn] | Conn
    actor: Actor
    settings: Settings
    # The state searches share (the vector leg's threads, the base sizes seen): the Database's.
    search_runtime: SearchRuntime
    # Called with every search's response: the server counts searches in its metrics, from
    # whichever surface they come.
    on_search: Callable[[SearchResponse], None] | None = None
    # Searches for an answer run leave out the bullets runs asked with or wrote: they are no
    # sources, and a page asked the same question often would otherwise fill the top hits
    # with its own questions and answers (answers/sources.py).
    sources_only: bool = False

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """Yield a connection inside a transaction that commits on success."""
        if isinstance(self.db, ConnectionPool):
            with self.db.connection() as conn, conn.transaction():
                yield conn
        else:
            with self.db.transaction():
                yield self.db

    def on(self, conn: Conn) -> Context:
        """The same context bound to one connection."""
        return replace(self, db=conn)
