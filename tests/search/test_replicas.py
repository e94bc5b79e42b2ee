"""Searches on a real streaming replica (db/standby.py makes one of an embedded primary): they
are served there, and a caller always reads its own writes, by header or by cookie."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from subspace.api import create_app
from subspace.config import Settings
from subspace.database import Database, open_database
from subspace.db.embedded import EmbeddedPostgres, start_embedded
from subspace.db.migrate import migrate
from subspace.db.replicas import Replicas, parse_lsn
from subspace.db.standby import Standby, start_standby
from subspace.keys import create_key, default_actor
from subspace.search.lexical.index.layout import database_identity, index_root
from subspace.sessions import create_signin_code
from tests.conftest import free_port

pytestmark = pytest.mark.slow
POSITION = "subspace-position"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[EmbeddedPostgres, Standby]]:
    # Not under pytest's temporary folder: as root, Postgres runs as another user.
    folder = Path(tempfile.mkdtemp(prefix="subspace-replica-"))
    # Not a throwaway server: without synchronous_commit a commit reaches the WAL on disk, and
    # so the replica, only at the WAL writer's next round (up to 200 ms), and every read of
    # one's own write would wait for it.
    primary = start_embedded(folder / "primary")
    try:
        migrate(primary.dsn)
        standby = start_standby(primary, folder / "replica", free_port())
        try:
            yield primary, standby
        finally:
            standby.stop()
    finally:
        primary.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def replicated(servers: tuple[EmbeddedPostgres, Standby], tmp_path: Path) -> Iterator[Database]:
    primary, standby = servers
    settings = Settings(home=tmp_path / "home", database_url=primary.dsn, providers="fake",
                        replica_url=standby.dsn)  # fmt: skip
    db = open_database(settings, pool_size=4, replicas=True)
    yield db
    db.close()


def keyed_client(db: Database, settings: Settings, *, background: bool) -> TestClient:
    with db.pool.connection() as conn:
        _, token = create_key(conn, default_actor(conn), "replica test")
    client = TestClient(create_app(settings, db, background=background))
    client.headers["authorization"] = f"Bearer {token}"
    return client


def settings_of(db: Database, tmp_path: Path, standby: Standby) -> Settings:
    return Settings(home=tmp_path / "home", database_url=db.dsn, providers="fake",
                    replica_url=standby.dsn)  # fmt: skip


@contextmanager
def replay_paused(standby: Standby) -> Iterator[None]:
    """The replica receives WAL but applies none of it within the block."""
    with psycopg.connect(standby.dsn, autocommit=True) as replica:
        replica.execute("select pg_wal_replay_pause()")
        try:
            yield
        finally:
            replica.execute("select pg_wal_replay_resume()")


def replayed_by(standby: Standby, position: int, timeout_s: float = 30.0) -> None:
    """Wait until the replica has replayed `position`."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(standby.dsn, autocommit=True) as replica:
        while True:
            row = replica.execute("select pg_last_wal_replay_lsn()::text").fetchone()
            if row and (parse_lsn(row[0]) or 0) >= position:
                return
            assert time.monotonic() < deadline, f"the replica did not replay {position} in time"
            time.sleep(0.02)


def found(client: TestClient, word: str, **headers: str) -> bool:
    answer = client.get("/api/search", params={"q": word, "mode": "lexical"}, headers=headers)
    assert answer.status_code == 200, answer.text
    return any(word in row["passage"] for row in answer.json()["rows"])


def test_a_thousand_writes_are_each_read_back_at_once_from_the_replica(
    replicated: Database, servers: tuple[EmbeddedPostgres, Standby], tmp_path: Path
) -> None:
    settings = settings_of(replicated, tmp_path, servers[1])
    with keyed_client(replicated, settings, background=True) as client:
        page = client.post("/api/pages", json={"title": "Replicated"}).json()["id"]
        stale = 0
        for n in range(1000):
            word = f"quillon{n}x"
            wrote = client.post("/api/nodes", json={"page_id": page, "text": f"the {word} note"})
            assert wrote.status_code == 201, wrote.text
            stale += not found(client, word, **{POSITION: wrote.headers[POSITION]})
    replicas = replicated.replicas
    assert replicas is not None
    print(f"served by the replica {replicas.served}, by the primary {replicas.fell_back}")
    assert stale == 0
    assert replicas.served >= 900  # the replica keeps up: few reads wait past it


def test_a_replica_behind_a_callers_write_is_passed_over(
    replicated: Database, servers: tuple[EmbeddedPostgres, Standby], tmp_path: Path
) -> None:
    _, standby = servers
    settings = settings_of(replicated, tmp_path, standby)
    # No background work: the lexical index stays where it is, so only the caller's own
    # position can send a search to the primary.
    with keyed_client(replicated, settings, background=False) as client:
        page = client.post("/api/pages", json={"title": "Paused"}).json()["id"]
        with replay_paused(standby):
            wrote = client.post("/api/nodes", json={"page_id": page, "text": "the grommet note"})
            position = wrote.headers[POSITION]
            assert not found(client, "grommet")  # a caller that drops it reads the replica
            assert found(client, "grommet", **{POSITION: position})  # the primary answers
            bad = client.get("/api/search", params={"q": "grommet"},
                             headers={POSITION: "yesterday"})  # fmt: skip
            assert bad.status_code == 422
            assert "WAL position" in bad.json()["error"]["message"]
            too_long = client.get("/api/search", params={"q": "grommet"},
                                  headers={POSITION: "1" * 5000 + "/1"})  # fmt: skip
            assert too_long.status_code == 422
            # A position no replica can have reached, made up: the primary answers at once
            # rather than after a wait for a replica (each such read would hold a thread).
            replicas = replicated.replicas
            assert replicas is not None
            unseen, fell_back = replicas.unseen, replicas.fell_back
            forged = client.get("/api/search", params={"q": "grommet"},
                                headers={POSITION: "FFFFFFFF/FFFFFFFF"})  # fmt: skip
            assert forged.status_code == 200
            assert (replicas.unseen, replicas.fell_back) == (unseen + 1, fell_back)

            # A browser's session carries it in a cookie.
            with replicated.pool.connection() as conn:
                code = create_signin_code(conn, default_actor(conn), 15)
            browser = TestClient(client.app, follow_redirects=False)
            assert browser.post("/signin", data={"code": code}).status_code == 303
            added = browser.post("/api/nodes", json={"page_id": page, "text": "the sprocket"},
                                 headers={"origin": "http://testserver"})  # fmt: skip
            assert added.status_code == 201, added.text
            assert found(browser, "sprocket")


def test_a_replica_behind_the_lexical_index_is_passed_over(
    replicated: Database, servers: tuple[EmbeddedPostgres, Standby], tmp_path: Path
) -> None:
    """The index's hits must name rows the replica has: one that has not replayed the
    position the index was read at answers no search, even a caller's who never wrote."""
    _, standby = servers
    settings = settings_of(replicated, tmp_path, standby)
    with keyed_client(replicated, settings, background=True) as client:
        page = client.post("/api/pages", json={"title": "Indexed"}).json()["id"]
        with replay_paused(standby):
            wrote = client.post("/api/nodes", json={"page_id": page, "text": "the ratchet"})
            written = parse_lsn(wrote.headers[POSITION]) or 0
            reader = replicated.search_runtime.lexical_reader(
                index_root(settings), lambda: database_identity_of(replicated)
            )
            deadline = time.monotonic() + 30
            while (parse_lsn(reader.held_lsn()) or 0) < written:  # the follower applies it
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert found(client, "ratchet")  # no position sent: the index's sends it on


def database_identity_of(db: Database) -> str:
    with db.pool.connection() as conn:
        return database_identity(conn)


def test_a_replica_that_is_down_is_read_around_at_once() -> None:
    """Down when the server starts and at every read: the primary answers, without a wait."""
    down = Replicas([f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"], 1)
    try:
        down.saw_primary_at(100)
        assert down.pool_for(50) is None
        assert down.replicas[0].down_until > 0  # left alone for a while
        assert down.pool_for(50) is None
        assert (down.served, down.fell_back) == (0, 2)
    finally:
        down.close()


def test_a_replica_that_dies_fails_one_read_and_is_read_around(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="subspace-replica-"))
    primary = start_embedded(folder / "primary")
    try:
        migrate(primary.dsn)
        standby = start_standby(primary, folder / "replica", free_port())
        settings = Settings(home=tmp_path / "home", database_url=primary.dsn, providers="fake",
                            replica_url=standby.dsn)  # fmt: skip
        db = open_database(settings, pool_size=2, replicas=True)
        try:
            with keyed_client(db, settings, background=False) as client:
                page = client.post("/api/pages", json={"title": "Dies"}).json()["id"]
                wrote = client.post("/api/nodes", json={"page_id": page, "text": "the flywheel"})
                # A keyed client gets no cookie: it reads its write back by the header, from
                # the replica once it has replayed the write (a busy machine may take longer
                # than a read waits for it).
                position = wrote.headers[POSITION]
                replayed_by(standby, parse_lsn(position) or 0)
                assert found(client, "flywheel", **{POSITION: position})
                assert db.replicas is not None and db.replicas.served == 1
                standby.stop()
                failed = client.get("/api/search", params={"q": "flywheel"})
                assert failed.status_code == 503, failed.text
                assert "read replica stopped answering" in failed.json()["error"]["message"]
                assert found(client, "flywheel")  # the primary, from the next read on
                assert found(client, "flywheel")
        finally:
            db.close()
    finally:
        primary.stop()
        shutil.rmtree(folder, ignore_errors=True)
