"""A search whose client has gone stops: in Postgres, between its steps, and in the queue for
its workspace's turn."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import httpx
import psycopg
import pytest

from subspace.api import create_app
from subspace.cancel import Cancel
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import CallerGone
from subspace.keys import create_key
from subspace.search.request import SearchRequest
from subspace.search.service import search
from subspace.shares import Shares
from tests.conftest import serving


def waiting_on_a_lock(dsn: str, other_than: int) -> list[str]:
    """Statements of other backends waiting for a lock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "select query from pg_stat_activity where wait_event_type = 'Lock' and pid <> %s "
            "and datname = current_database()",
            (other_than,),
        ).fetchall()
    return [row[0] for row in rows]


def eventually(check: Callable[[], bool], seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_search_whose_client_goes_stops_its_statement(
    database: Database, settings: Settings, cx: Context
) -> None:
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "palette")
    body = json.dumps({"query": "ferry timetable"}).encode()
    request = (
        f"POST /api/search HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        f"authorization: Bearer {token}\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    with serving(create_app(settings, database)) as port, psycopg.connect(database.dsn) as locker:
        # The search's first statements read the knowledge bases: held, they wait.
        locker.execute("lock table kb.knowledge_bases in access exclusive mode")
        me = locker.info.backend_pid
        client = socket.create_connection(("127.0.0.1", port))
        client.sendall(request)
        assert eventually(lambda: bool(waiting_on_a_lock(database.dsn, me)))
        client.close()  # the palette aborts: a newer keystroke's search replaces it
        # The statement stops waiting though the lock is still held.
        assert eventually(lambda: not waiting_on_a_lock(database.dsn, me), seconds=5)
        locker.rollback()
        # The connection it held serves the next search.
        found = httpx.post(f"http://127.0.0.1:{port}/api/search", json={"query": "ferry"},
                           headers={"authorization": f"Bearer {token}"}, timeout=10)  # fmt: skip
        assert found.status_code == 200, found.text


def test_a_search_stops_at_its_next_step_once_cancelled(database: Database, cx: Context) -> None:
    cancel = Cancel()
    cancel.cancel()
    with pytest.raises(CallerGone):
        search(cx, database.searcher(None).cancelled_by(cancel), SearchRequest(query="ferry"))
    assert search(cx, database.searcher(None), SearchRequest(query="ferry")).rows == []


def test_a_cancelled_waiter_leaves_the_queue_for_its_turn() -> None:
    shares = Shares("searches in flight", total=None, per_key=1)
    cancel = Cancel()
    outcome: list[BaseException] = []
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with shares.hold("ws", wait_s=None):
            held.set()
            release.wait(10)

    def waiter() -> None:
        try:
            with shares.hold("ws", wait_s=30, cancel=cancel):
                pass
        except BaseException as exc:
            outcome.append(exc)

    first = threading.Thread(target=holder)
    first.start()
    held.wait(5)
    second = threading.Thread(target=waiter)
    started = time.monotonic()
    second.start()
    time.sleep(0.1)
    cancel.cancel()
    second.join(5)
    assert not second.is_alive()
    assert time.monotonic() - started < 2  # not its 30 s wait
    assert isinstance(outcome[0], CallerGone)
    release.set()
    first.join(5)
    assert shares.held() == 0
