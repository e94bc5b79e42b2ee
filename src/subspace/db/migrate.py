"""Apply the numbered SQL files in `migrations/`, each in its own transaction."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from subspace.db.locks import MIGRATION_LOCK_KEY
from subspace.db.pool import check_pgvector, connect

_FILE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """Every migration shipped in the package, in version order."""
    found = []
    for entry in resources.files("subspace.db.migrations").iterdir():
        match = _FILE_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise AssertionError(f"duplicate migration versions: {versions}")
    return found


def applied_versions(conn: psycopg.Connection[Any]) -> set[int]:
    """Versions already applied; empty on a database that was never migrated."""
    exists = conn.execute("select to_regclass('public.schema_migrations')").fetchone()
    if exists is None or _first(exists) is None:
        return set()
    rows = conn.execute("select version from public.schema_migrations").fetchall()
    return {int(_first(row)) for row in rows}


def pending_migrations(conn: psycopg.Connection[Any]) -> list[Migration]:
    done = applied_versions(conn)
    return [m for m in available_migrations() if m.version not in done]


def migrate(dsn: str) -> list[Migration]:
    """Bring the database at `dsn` to the newest schema; return the migrations applied.

    Safe to run from several processes at once: an advisory lock serialises them and the
    later ones find nothing left to do.
    """
    with connect(dsn, autocommit=True) as conn:
        check_pgvector(conn)
        conn.execute("select pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        try:
            conn.execute(
                "create table if not exists public.schema_migrations ("
                " version integer primary key, name text not null,"
                " applied_at timestamptz not null default now())"
            )
            applied = []
            for migration in pending_migrations(conn):
                with conn.transaction():
                    conn.execute(migration.sql)
                    conn.execute(
                        "insert into public.schema_migrations (version, name) values (%s, %s)",
                        (migration.version, migration.name),
                    )
                applied.append(migration)
            return applied
        finally:
            conn.execute("select pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


def _first(row: Any) -> Any:
    return row[0] if isinstance(row, tuple) else next(iter(row.values()))
