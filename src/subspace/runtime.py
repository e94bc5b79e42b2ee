"""Opening the database a process works on: embedded or external, migrated, pooled."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from subspace.config import Settings
from subspace.context import Context
from subspace.db.embedded import EmbeddedPostgres, start_embedded
from subspace.db.migrate import migrate
from subspace.db.pool import Conn, open_pool
from subspace.keys import default_actor
from subspace.models import Actor

log = logging.getLogger(__name__)


@dataclass
class Database:
    """A migrated database and its pool; `close()` also stops an embedded server we started."""

    dsn: str
    pool: ConnectionPool[Conn]
    embedded: EmbeddedPostgres | None

    def close(self) -> None:
        """Close the pool, then stop the embedded server. Safe to call twice."""
        self.pool.close()
        if self.embedded is not None:
            self.embedded.stop()

    def default_context(self, settings: Settings) -> Context:
        """A context acting as the default workspace's first user."""
        with self.pool.connection() as conn:
            actor = default_actor(conn)
        return self.context(actor, settings)

    def context(self, actor: Actor, settings: Settings) -> Context:
        return Context(db=self.pool, actor=actor, settings=settings)


def resolve_dsn(settings: Settings) -> tuple[str, EmbeddedPostgres | None]:
    """The DSN to use: SUBSPACE_DATABASE_URL, or the embedded server under SUBSPACE_HOME."""
    if settings.database_url:
        return settings.database_url, None
    settings.home.mkdir(parents=True, exist_ok=True)
    embedded = start_embedded(settings.pgdata)
    log.info("embedded postgres running in %s", embedded.pgdata)
    return embedded.dsn, embedded


def open_database(settings: Settings, *, pool_size: int = 10) -> Database:
    """Start or reach Postgres, apply pending migrations and open a pool."""
    dsn, embedded = resolve_dsn(settings)
    try:
        applied = migrate(dsn)
        for migration in applied:
            log.info("applied migration %04d_%s", migration.version, migration.name)
        pool = open_pool(dsn, max_size=pool_size)
    except BaseException:
        if embedded is not None:
            embedded.stop()
        raise
    return Database(dsn=dsn, pool=pool, embedded=embedded)
