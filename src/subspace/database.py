"""Opening the database a process works on: embedded or external, migrated, pooled."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from psycopg_pool import ConnectionPool

from subspace.config import Settings
from subspace.context import Context, WriteRetries
from subspace.db.embedded import EmbeddedPostgres, start_embedded
from subspace.db.migrate import migrate
from subspace.db.pool import Conn, open_pool
from subspace.db.replicas import Replicas, parse_replica_urls
from subspace.floods import Precedence
from subspace.ingest.isolation import PARSER_NICENESS, ParserPools
from subspace.keys import default_actor
from subspace.models import Actor
from subspace.search.searcher import Searcher
from subspace.search.shared import SearchRuntime
from subspace.shares import Shares

if TYPE_CHECKING:
    from subspace.providers.base import EmbeddingProvider

log = logging.getLogger(__name__)


# Connections kept out of the requests' reach, besides one per extraction worker (each holds
# its own for as long as a file takes): the indexer's listener and worker, /readyz, and one
# spare. Searches cannot starve them however many run.
RESERVED_CONNECTIONS = 4


def reserved_connections(settings: Settings) -> int:
    """The size of the pool kept for background work and health checks."""
    return RESERVED_CONNECTIONS + settings.extract_workers


# How long a request waits for a connection before it answers 503 with Retry-After. Longer
# than any healthy search (tens of ms), far shorter than a client's patience: a 30 s queue
# behind slow searches only multiplies the requests waiting in threads.
REQUEST_CONNECTION_WAIT_S = 2.0


# How much less of the cores the yielding pool's statements claim than a request's, in
# Postgres: as much as the parser child that reads an upload (ingest/isolation.py). A flood of
# uploads, or of any requests past a workspace's share, then waits for people's searches in
# its backends too.
YIELDING_NICENESS = PARSER_NICENESS


def connection_shares(pool_size: int) -> Shares:
    """The request connections' shares: a workspace alone may use the whole pool; beside
    another it holds one per core, so that its flood of writes leaves the others connections
    and cores."""
    return Shares(
        "database connections in use",
        total=None,
        per_key=pool_size,
        shared_per_key=max(1, os.cpu_count() or 1),
    )


@dataclass
class Database:
    """A migrated database and its pools; `close()` also stops an embedded server we started.

    `pool` serves background work, health checks and the command line; `requests`, when set,
    is the pool request contexts draw from, so that requests holding every one of its
    connections cannot starve the background; `yielding`, when set, the one whose backends are
    niced (YIELDING_NICENESS): uploads and mail imports write through it, and so does a
    workspace flooding the server (floods.py), so that neither starves the others' searches.
    `search_runtime` is what its searches share (`searcher()`); it lives and closes with the
    pools its threads borrow from.
    """

    dsn: str
    pool: ConnectionPool[Conn]
    embedded: EmbeddedPostgres | None
    requests: ConnectionPool[Conn] | None = None
    yielding: ConnectionPool[Conn] | None = None
    search_runtime: SearchRuntime = field(default_factory=SearchRuntime)
    connection_shares: Shares = field(default_factory=lambda: connection_shares(10))
    parsers: ParserPools = field(default_factory=ParserPools)
    write_retries: WriteRetries = field(default_factory=WriteRetries)
    # People's requests before a flood's, in this process's interpreter (floods.py).
    precedence: Precedence = field(default_factory=Precedence)
    # Streaming replicas searches and reads may go to (SUBSPACE_REPLICA_URL); None: none.
    replicas: Replicas | None = None

    def close(self) -> None:
        """Stop the searches' threads, close the pools, then stop the embedded server. Safe
        to call twice."""
        self.search_runtime.close()
        self.parsers.close()
        if self.replicas is not None:
            self.replicas.close()
        for pool in (self.requests, self.yielding):
            if pool is not None:
                pool.close()
        self.pool.close()
        if self.embedded is not None:
            self.embedded.stop()

    def default_context(self, settings: Settings) -> Context:
        """A context acting as the default workspace's first user."""
        with self.pool.connection() as conn:
            actor = default_actor(conn)
        return self.context(actor, settings)

    @property
    def request_pool(self) -> ConnectionPool[Conn]:
        """The pool requests draw from (the only pool, when there is one)."""
        return self.requests or self.pool

    def context(self, actor: Actor, settings: Settings) -> Context:
        """A context on the request pool."""
        return Context(
            db=self.request_pool,
            actor=actor,
            settings=settings,
            connection_shares=self.connection_shares,
            yielding=self.yielding,
            parsers=self.parsers,
            write_retries=self.write_retries,
            precedence=self.precedence,
        )

    def searcher(self, provider: EmbeddingProvider | None) -> Searcher:
        """Searching with `provider` (None: the lexical leg alone) on this database's
        shared search state."""
        return Searcher(self.search_runtime, provider)


def resolve_dsn(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The DSN to use: SUBSPACE_DATABASE_URL, or the embedded server under SUBSPACE_HOME."""
    if settings.database_url:
        return settings.database_url, None
    settings.home.mkdir(parents=True, exist_ok=True)
    embedded = start_embedded(settings.pgdata)
    log.info("embedded postgres running in %s", embedded.pgdata)
    return embedded.dsn, embedded


def open_database(
    settings: Settings, *, pool_size: int = 10, replicas: bool = False, yielding: bool = False
) -> Database:
    """Start or reach Postgres, apply pending migrations and open the pools: `pool_size`
    connections for requests, `reserved_connections()` more for everything else, with
    `replicas` as many to each of SUBSPACE_REPLICA_URL's (a web process's reads), and with
    `yielding` one per core on niced backends (a web process's uploads and floods)."""
    dsn, embedded = resolve_dsn(settings)
    # Backends are niced (a niced process's, the yielding pool's) on this home's server only.
    own = settings.pgdata
    opened: list[ConnectionPool[Conn]] = []
    try:
        applied = migrate(dsn)
        for migration in applied:
            log.info("applied migration %04d_%s", migration.version, migration.name)
        pool = open_pool(
            dsn, max_size=reserved_connections(settings), name="subspace-reserved", own_server=own
        )
        opened.append(pool)
        requests = open_pool(
            dsn, max_size=pool_size, timeout=REQUEST_CONNECTION_WAIT_S,
            name="subspace-requests", own_server=own,
        )  # fmt: skip
        opened.append(requests)
        niced = None
        if yielding:
            # A workspace writes through at most its share of connections (one per core beside
            # another): one per core is what uploads and floods need, not a second pool_size.
            niced = open_pool(
                dsn, max_size=max(2, os.cpu_count() or 1), timeout=REQUEST_CONNECTION_WAIT_S,
                name="subspace-yielding", niceness=YIELDING_NICENESS, own_server=own,
            )  # fmt: skip
            opened.append(niced)
        urls = parse_replica_urls(settings.replica_url) if replicas else []
        readers = Replicas(urls, pool_size) if urls else None
    except BaseException:
        for each in opened:
            each.close()
        if embedded is not None:
            embedded.stop()
        raise
    return Database(
        dsn=dsn,
        pool=pool,
        embedded=embedded,
        requests=requests,
        yielding=niced,
        connection_shares=connection_shares(pool_size),
        replicas=readers,
    )
