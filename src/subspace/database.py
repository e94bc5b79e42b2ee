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


# How much less of the cores an upload's statements claim than a search's, in Postgres: as
# much as the parser child that reads the upload (ingest/isolation.py). A flood of uploads
# then waits for people's searches in its backends too, not only in its parsing.
IMPORT_NICENESS = PARSER_NICENESS


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
    connections cannot starve the background; `imports`, when set, the one uploads and mail
    imports write through (niced: IMPORT_NICENESS), so that they cannot starve searches.
    `search_runtime` is what its searches share (`searcher()`); it lives and closes with the
    pools its threads borrow from.
    """

    dsn: str
    pool: ConnectionPool[Conn]
    embedded: EmbeddedPostgres | None
    requests: ConnectionPool[Conn] | None = None
    imports: ConnectionPool[Conn] | None = None
    search_runtime: SearchRuntime = field(default_factory=SearchRuntime)
    connection_shares: Shares = field(default_factory=lambda: connection_shares(10))
    parsers: ParserPools = field(default_factory=ParserPools)
    write_retries: WriteRetries = field(default_factory=WriteRetries)
    # Streaming replicas searches and reads may go to (SUBSPACE_REPLICA_URL); None: none.
    replicas: Replicas | None = None

    def close(self) -> None:
        """Stop the searches' threads, close the pools, then stop the embedded server. Safe
        to call twice."""
        self.search_runtime.close()
        self.parsers.close()
        if self.replicas is not None:
            self.replicas.close()
        for pool in (self.requests, self.imports):
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
            imports=self.imports,
            parsers=self.parsers,
            write_retries=self.write_retries,
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
    settings: Settings, *, pool_size: int = 10, replicas: bool = False, imports: bool = False
) -> Database:
    """Start or reach Postgres, apply pending migrations and open the pools: `pool_size`
    connections for requests, `reserved_connections()` more for everything else, with
    `replicas` as many to each of SUBSPACE_REPLICA_URL's (a web process's reads), and with
    `imports` one per core for uploads (a web process's)."""
    dsn, embedded = resolve_dsn(settings)
    # Backends are niced (for a niced process, or the uploads') on this home's own server only.
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
        uploads = None
        if imports:
            # A workspace writes through at most its share of connections (one per core beside
            # another): one per core is what uploads need, not a second pool_size.
            uploads = open_pool(
                dsn, max_size=max(2, os.cpu_count() or 1), timeout=REQUEST_CONNECTION_WAIT_S,
                name="subspace-imports", niceness=IMPORT_NICENESS, own_server=own,
            )  # fmt: skip
            opened.append(uploads)
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
        imports=uploads,
        connection_shares=connection_shares(pool_size),
        replicas=readers,
    )
