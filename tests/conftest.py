"""Fixtures: one real Postgres per test session, and a fresh database for every test.

Set SUBSPACE_TEST_DATABASE_URL to run against another server (it needs pgvector >= 0.8 and
the right to create databases); otherwise the embedded server starts in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn
from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace.api import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.embedded import start_embedded
from subspace.db.migrate import migrate
from subspace.db.pool import open_pool
from subspace.keys import create_key
from subspace.models import Actor
from tests.databases import Clones, server_folder, with_dbname

# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment, which the
# CLI's console reads once, when it is created; without them it reads them as it prints, as it
# does in a terminal and in a run without workers, so a test that sets COLUMNS gets its width.
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    external = os.environ.get("SUBSPACE_TEST_DATABASE_URL")
    if external:
        yield external
        return
    folder = server_folder()
    embedded = start_embedded(folder / "data", throwaway=True)
    yield embedded.dsn
    embedded.stop()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def clones(server_dsn: str) -> Iterator[Clones]:
    """Fresh databases, each a clone of one migrated template."""
    # One template per test process: pytest-xdist's workers may share an external server.
    template = f"subspace_test_template_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"drop database if exists {template} with (force)")
        conn.execute(f"create database {template}")
    migrate(with_dbname(server_dsn, template))
    made = Clones(server_dsn, template)
    yield made
    made.close()


@pytest.fixture
def db_dsn(server_dsn: str, clones: Clones) -> Iterator[str]:
    """A fresh, migrated database for one test, dropped afterwards."""
    name = clones.take()
    yield with_dbname(server_dsn, name)
    clones.give_back(name)


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A new database with nothing in it, not even the migrations; dropped afterwards."""
    name = f"subspace_test_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        conn.execute(f"create database {name}")
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any, port: int | None = None, log_level: str = "warning") -> Iterator[int]:
    """`app` on a real uvicorn in a thread, on 127.0.0.1 and `port` (a free one when None),
    until the block ends; yields the port."""
    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def key_of_home(env: dict[str, str]) -> str:
    """A new API key of the home `env` names, made by `subspace keys create` (as a user
    would, beside a running server)."""
    made = subprocess.run(
        [sys.executable, "-m", "subspace", "keys", "create", "--name", "test"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return made.stdout.strip().splitlines()[-1]


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


@pytest.fixture
def runner(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """Click's runner for `subspace` commands on the test's database, fake provider."""
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
    monkeypatch.setenv("PROVIDERS", "fake")
    return CliRunner()
