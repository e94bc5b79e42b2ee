"""Fixtures: one real Postgres per test session, and a fresh database for every test.

Set SUBSPACE_TEST_DATABASE_URL to run against another server (it needs pgvector >= 0.8 and
the right to create databases); otherwise the embedded server starts in a temporary folder.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from subspace.api import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.db.embedded import start_embedded
from subspace.db.migrate import migrate
from subspace.db.pool import open_pool
from subspace.keys import create_key
from subspace.models import Actor
from subspace.runtime import Database

TEMPLATE = "subspace_test_template"
_counter = itertools.count()


def with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    external = os.environ.get("SUBSPACE_TEST_DATABASE_URL")
    if external:
        yield external
        return
    # Outside pytest's temporary folders: a concurrent pytest run prunes old ones, which would
    # delete this server's data under it.
    folder = Path(tempfile.mkdtemp(prefix="subspace-test-pg-"))
    embedded = start_embedded(folder / "data")
    yield embedded.dsn
    embedded.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def template_dsn(server_dsn: str) -> str:
    """A migrated database that every test's database is cloned from."""
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"drop database if exists {TEMPLATE} with (force)")
        conn.execute(f"create database {TEMPLATE}")
    dsn = with_dbname(server_dsn, TEMPLATE)
    migrate(dsn)
    return dsn


@pytest.fixture
def db_dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A fresh, migrated database for one test, dropped afterwards."""
    name = f"subspace_test_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"create database {name} template {TEMPLATE} strategy file_copy")
    yield with_dbname(server_dsn, name)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")


@pytest.fixture
def settings(tmp_path: Path, db_dsn: str) -> Settings:
    return Settings(home=tmp_path / "home", database_url=db_dsn, providers="fake")


@pytest.fixture
def database(db_dsn: str) -> Iterator[Database]:
    pool = open_pool(db_dsn, max_size=4)
    db = Database(dsn=db_dsn, pool=pool, embedded=None)
    yield db
    db.close()


@pytest.fixture
def cx(database: Database, settings: Settings) -> Context:
    """Acting as the default workspace's owner."""
    return database.default_context(settings)


@pytest.fixture
def actor(cx: Context) -> Actor:
    return cx.actor


def make_client(database: Database, settings: Settings, actor: Actor) -> TestClient:
    with database.pool.connection() as conn:
        _, token = create_key(conn, actor, "test")
    client = TestClient(create_app(settings, database))
    client.headers["authorization"] = f"Bearer {token}"
    return client


@pytest.fixture
def client(database: Database, settings: Settings, actor: Actor) -> TestClient:
    """An HTTP client authenticated as the default workspace's owner."""
    return make_client(database, settings, actor)


def api_operations(client: TestClient) -> list[tuple[str, str]]:
    """Every (METHOD, path template) under /api/, from the app's OpenAPI document."""
    schema = client.get("/openapi.json").json()
    return sorted(
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        if path.startswith("/api/")
        for method in operations
    )
