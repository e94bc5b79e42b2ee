"""What can wait claims less of the cores in Postgres too (priority.lend_niceness): a niced
process's backends are niced as it is, and uploads write through niced backends, on this
home's own server only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from subspace.config import Settings
from subspace.context import Context
from subspace.database import YIELDING_NICENESS, Database
from subspace.db.pool import Conn, open_pool
from subspace.models import Actor
from subspace.search import service
from subspace.workspaces import create_workspace
from tests.conftest import make_client
from tests.search.test_cancel import eventually
from tests.surfaces.test_metrics import loopback_client

NICED = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import psycopg
    os.nice(7)
    from subspace.db.pool import open_pool
    from subspace.priority import lend_niceness
    dsn, folder = sys.argv[1], Path(sys.argv[2])
    pool = open_pool(dsn, max_size=1, own_server=folder)
    elsewhere = open_pool(dsn, max_size=1, own_server=Path("/srv/another/server"))
    plain = psycopg.connect(dsn)  # opened outside a pool: left as it is
    other = plain.execute("select pg_backend_pid()").fetchone()[0]
    pid = "select pg_backend_pid() as pid"
    with pool.connection() as conn, elsewhere.connection() as far:
        seen = {
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
            "pooled": conn.execute(pid).fetchone()["pid"],
            "elsewhere": far.execute(pid).fetchone()["pid"],
            "plain": other,
            # a pid that is no backend of the server, and a backend of another folder
            "not_a_backend": lend_niceness(os.getpid(), str(folder)),
            "other_folder": lend_niceness(other, "/"),
        }
        print(json.dumps(seen), flush=True)
        sys.stdin.readline()  # the backends live until the test has looked at them
    pool.close()
    elsewhere.close()
    """
)


def backend_pid(conn: Conn) -> int:
    return int(conn.execute("select pg_backend_pid() as pid").fetchone()["pid"])  # type: ignore[index]


def niceness(pid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid)


def thread_niceness(pid: int) -> set[int]:
    """The niceness of each of `pid`'s threads (Linux keeps one per thread)."""
    found = set()
    for thread in os.listdir(f"/proc/{pid}/task"):
        with suppress(ProcessLookupError):  # one that has ended since
            found.add(niceness(int(thread)))
    return found


@pytest.fixture
def server_folder(database: Database) -> Path:
    """The test server's data folder, when its backends are this machine's and this user's."""
    with database.pool.connection() as conn:
        pid = backend_pid(conn)
        folder = conn.execute("select current_setting('data_directory') as d").fetchone()["d"]  # type: ignore[index]
    try:
        if os.path.realpath(f"/proc/{pid}/cwd") != os.path.realpath(folder):
            raise OSError
    except OSError:
        pytest.skip("the test server's backends are not this machine's and this user's")
    return Path(folder)


def test_a_niced_process_opens_backends_niced_as_it_is(
    database: Database, server_folder: Path
) -> None:
    with database.pool.connection() as conn:
        as_started = niceness(backend_pid(conn))  # a backend as the server starts it
    child = subprocess.Popen(
        [sys.executable, "-c", NICED, database.dsn, str(server_folder)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    try:
        seen = json.loads(child.stdout.readline())
        pooled = seen["pooled"]
        assert niceness(pooled) == max(seen["niceness"], as_started)
        autogroup = Path(f"/proc/{pooled}/autogroup")
        if os.getsid(pooled) == pooled and autogroup.exists():  # the session's claim too
            assert autogroup.read_text().split()[-1] == str(niceness(pooled))
        assert seen["not_a_backend"] is False and seen["other_folder"] is False
        assert niceness(seen["plain"]) == as_started
        assert niceness(seen["elsewhere"]) == as_started  # not this home's server: untouched
    except BaseException:
        child.kill()
        raise
    child.stdin.write("\n")
    child.stdin.flush()
    assert child.wait(timeout=30) == 0


@pytest.fixture
def with_yielding(database: Database, server_folder: Path) -> Iterator[Database]:
    """The test database with a yielding pool, niced as a web process's is."""
    niced = open_pool(
        database.dsn, max_size=2, niceness=YIELDING_NICENESS, own_server=server_folder
    )
    yield replace(database, yielding=niced)
    niced.close()


def test_uploads_write_through_niced_backends_and_a_search_does_not(
    with_yielding: Database, settings: Settings, actor: Actor
) -> None:
    cx = with_yielding.context(actor, settings)
    with cx.transaction() as conn:
        as_started = niceness(backend_pid(conn))
    with cx.niced().transaction() as conn:
        assert niceness(backend_pid(conn)) == max(YIELDING_NICENESS, as_started)

    client = make_client(with_yielding, settings, actor)
    niced = with_yielding.yielding
    assert niced is not None
    message = b"Message-ID: <m1@x>\r\nFrom: a@x\r\nSubject: Pier\r\n\r\nThe pier is closed.\r\n"
    uploads: list[tuple[str, dict[str, Any]]] = [
        ("/api/mail/import", {"files": {"file": ("m.eml", message, "message/rfc822")}}),
        ("/api/files", {"files": {"file": ("n.txt", b"harbour notes", "text/plain")}}),
        ("/api/mail", {"json": {"message_id": "<m2@x>", "body_text": "the quay"}}),
    ]
    for path, body in uploads:
        niced.pop_stats()
        answer = client.post(path, **body)
        assert answer.status_code in (200, 201), answer.text
        assert niced.pop_stats().get("requests_num", 0) >= 1, path
    # without a yielding pool (the command line, the tests' apps) an upload writes as before
    assert Context(with_yielding.pool, actor, settings).niced().db is with_yielding.pool


def test_a_flooding_workspace_writes_and_searches_on_niced_backends_its_neighbour_does_not(
    with_yielding: Database, settings: Settings, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    cx = with_yielding.context(actor, settings)
    with with_yielding.pool.connection() as conn:
        neighbour = replace(cx, actor=create_workspace(conn, "Neighbour"))
    neighbour_id = neighbour.actor.workspace_id
    shares = cx.connection_shares
    assert shares is not None and shares.shared_per_key is not None
    shares.watch.flood_s = 0.2
    with neighbour.transaction() as conn:
        as_started = niceness(backend_pid(conn))
    holding = threading.Barrier(shares.shared_per_key + 1)
    releases = [threading.Event() for _ in range(shares.shared_per_key)]
    seen: list[int] = []

    def hold_a_transaction(release: threading.Event) -> None:
        with cx.transaction():
            holding.wait(10)
            release.wait(10)

    def write_after_a_wait() -> None:
        with cx.transaction() as conn:
            seen.append(niceness(backend_pid(conn)))

    stepped_aside = with_yielding.precedence.stepped_aside
    holders = [threading.Thread(target=hold_a_transaction, args=(r,)) for r in releases]
    waiters = [threading.Thread(target=write_after_a_wait) for _ in range(2)]
    with neighbour.transaction():  # the neighbour uses the server too: "cx" has its share
        for thread in holders:
            thread.start()
        holding.wait(10)
        for thread in waiters:
            thread.start()
        # two of its requests wait, past the flood's time
        assert eventually(lambda: shares.watch.flooding(actor.workspace_id))
        people = with_yielding.precedence.runs(neighbour_id)
        with neighbour.transaction() as conn:
            assert niceness(backend_pid(conn)) == as_started
            # a request of the neighbour's runs: a flood's checkpoint waits for it
            assert with_yielding.precedence.runs(neighbour_id) == people + 1
        # One slot given back: a waiter goes in while the other still waits (a flood, its
        # backend niced); the other goes in when it is done, with none behind it.
        releases[0].set()
        for thread in waiters:
            thread.join()
        assert seen == [max(YIELDING_NICENESS, as_started), as_started]
        assert shares.floods == 1  # the flood's one request: told, and counted
        # it stepped aside first, while the neighbour's transaction (this block) ran
        assert with_yielding.precedence.stepped_aside == stepped_aside + 1
        for release in releases:
            release.set()
        for thread in holders:
            thread.join()
    with cx.transaction() as conn:
        assert niceness(backend_pid(conn)) == as_started

    # A search of a flooding workspace runs on the yielding pool; its neighbour's does not.
    niced = with_yielding.yielding
    assert niced is not None
    searches = with_yielding.search_runtime.searches
    monkeypatch.setattr(searches.watch, "flood_s", 0.0)
    mine, theirs = (make_client(with_yielding, settings, who) for who in (actor, neighbour.actor))
    running: list[int] = []  # people's requests running in this process, as each search ran
    each_search = service._search
    monkeypatch.setattr(
        service,
        "_search",
        lambda *a, **k: (
            running.append(with_yielding.precedence.runs(neighbour_id)) or each_search(*a, **k)
        ),
    )
    # One of its searches waits for its turn, while the neighbour searches too (and a request
    # of the neighbour's runs in this process: the flood's search steps aside between steps).
    with ExitStack() as stack:
        stack.enter_context(searches.watch.asking(actor.workspace_id))()
        stack.enter_context(searches.hold(neighbour_id, 5))
        stack.enter_context(with_yielding.precedence.running(neighbour_id))
        for client, expected in ((theirs, 0), (mine, 1)):
            niced.pop_stats()
            stepped_aside = with_yielding.precedence.stepped_aside
            answer = client.post("/api/search", json={"query": "ferry"})
            assert answer.status_code == 200
            assert niced.pop_stats().get("requests_num", 0) == expected
            assert (with_yielding.precedence.stepped_aside > stepped_aside) == bool(expected)
            assert ("aside" in answer.json()["steps"]) == bool(expected)  # its wait, timed
    # The neighbour's search counted itself beside this block's; the flood's did not.
    assert running == [2, 1]
    metrics = loopback_client(with_yielding, settings, actor).get("/metrics").text
    assert 'subspace_flooding_requests_total{waited_for="searches"} 1.0' in metrics
    assert 'subspace_flooding_requests_total{waited_for="connections"} 1.0' in metrics
    assert (
        f"subspace_flood_steps_aside_total {float(with_yielding.precedence.stepped_aside)}"
        in metrics
    )


def test_a_flood_runs_on_its_usual_pool_when_no_niced_connection_is_free(
    with_yielding: Database, settings: Settings, actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The yielding pool is small and uploads use it: a flood takes one of its connections
    only when one is free at once (NICED_WAIT_S), else it runs on the request pool as
    before, and never fails for want of one."""
    cx = with_yielding.context(actor, settings)
    with with_yielding.pool.connection() as conn:
        neighbour = create_workspace(conn, "Neighbour")
        as_started = niceness(backend_pid(conn))
    niced = with_yielding.yielding
    assert niced is not None and cx.connection_shares is not None
    shares, searches = cx.connection_shares, with_yielding.search_runtime.searches
    for each in (shares, searches):
        monkeypatch.setattr(each.watch, "flood_s", 0.0)
    client = make_client(with_yielding, settings, actor)
    with ExitStack() as stack:
        for each in (shares, searches):  # flooding: a request waits, a neighbour is active
            stack.enter_context(each.watch.asking(actor.workspace_id))()
            stack.enter_context(each.hold(neighbour.workspace_id, 5))
        held = [stack.enter_context(niced.connection()) for _ in range(niced.max_size)]
        assert held and niced.get_stats().get("pool_available", 0) == 0
        # Waiting for one of those would meet the pool's timeout (30 s here) and fail.
        with cx.transaction() as conn:  # on its usual pool, at full claim
            assert niceness(backend_pid(conn)) == as_started
        assert client.post("/api/search", json={"query": "ferry"}).status_code == 200
        assert shares.floods == 1 and searches.floods == 1  # told they flood, all the same
