"""Connections: psycopg 3 pools (one for requests, one kept for background work and health
checks), with pgvector's types registered."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from subspace.errors import DatabaseError
from subspace.priority import lend_niceness

Conn = psycopg.Connection[dict[str, Any]]

MIN_PGVECTOR = (0, 8)  # iterative index scans arrived in pgvector 0.8


def connect(dsn: str, **kwargs: Any) -> Conn:
    """Open one connection that returns rows as dicts."""
    try:
        conn = psycopg.connect(dsn, row_factory=dict_row, **kwargs)
    except psycopg.OperationalError as exc:
        raise DatabaseError(
            f"Cannot connect to Postgres ({exc}). Check SUBSPACE_DATABASE_URL, or unset it "
            "to use the embedded server."
        ) from exc
    return conn


def check_pgvector(conn: psycopg.Connection[Any]) -> str:
    """Return the pgvector version the server offers, or raise if it is missing or too old."""
    row = conn.execute(
        "select coalesce(installed_version, default_version) from pg_available_extensions "
        "where name = 'vector'"
    ).fetchone()
    if row is None:
        raise DatabaseError(
            "This Postgres has no pgvector extension. Install pgvector 0.8 or newer on the "
            "server, or unset SUBSPACE_DATABASE_URL to use the embedded server."
        )
    version = str(row[0] if isinstance(row, tuple) else next(iter(row.values())))
    if _version_tuple(version) < MIN_PGVECTOR:
        raise DatabaseError(
            f"pgvector {version} is too old: Subspace needs 0.8 or newer. Upgrade the "
            "extension on the server."
        )
    return version


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def _configure(
    conn: psycopg.Connection[Any], niceness: int = 0, own_server: Path | None = None
) -> None:
    register_vector(conn)
    conn.commit()
    if own_server is not None and max(niceness, os.getpriority(os.PRIO_PROCESS, 0)) > 0:
        _lend_niceness(conn, niceness, own_server)


def _lend_niceness(conn: psycopg.Connection[Any], niceness: int, own_server: Path) -> None:
    """Nice the connection's backend (priority.lend_niceness) when the server is the one
    whose data folder is `own_server` (the embedded server of this home): a pooler's or
    another host's backends are never touched. pg_settings shows the folder to a superuser
    or pg_read_all_settings only; to anyone else, no row and nothing niced."""
    row = conn.execute(
        "select pg_backend_pid() as pid, (select setting from pg_settings "
        "where name = 'data_directory') as folder"
    ).fetchone()
    conn.commit()
    assert row is not None  # the pools' rows are dicts (open_pool)
    folder = row["folder"]
    if folder is not None and os.path.realpath(folder) == os.path.realpath(own_server):
        lend_niceness(row["pid"], folder, niceness)


def open_pool(
    dsn: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = 30.0,
    name: str = "subspace",
    wait: bool = True,
    kind: type[ConnectionPool[Conn]] = ConnectionPool,
    niceness: int = 0,
    own_server: Path | None = None,
) -> ConnectionPool[Conn]:
    """Open a pool for a migrated database (pgvector's types must already exist).

    `timeout` is how long `connection()` waits for a free connection before it raises
    PoolTimeout. With `wait` the first connection must open now (or DatabaseError); without
    it the pool connects in the background, and a server that is down fails its borrowers.
    Its backends are niced by `niceness`, or as this process is when it is niced more, when
    the server is the one whose data folder is `own_server` (priority.lend_niceness).
    """
    pool: ConnectionPool[Conn] = kind(
        dsn,
        min_size=min_size,
        max_size=max_size,
        kwargs={"row_factory": dict_row},
        configure=partial(_configure, niceness=niceness, own_server=own_server),
        open=False,
        name=name,
        timeout=timeout,
    )
    try:
        pool.open(wait=wait, timeout=10)
    except psycopg.OperationalError as exc:
        raise DatabaseError(f"Cannot open a connection pool to Postgres ({exc}).") from exc
    return pool
