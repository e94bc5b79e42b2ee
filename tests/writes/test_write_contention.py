"""Writers at once in one workspace: one lock order, so none waits on another in a circle;
what still fails for a lock is run again; and the "Questions" page is made once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from subspace import commands
from subspace.answers import runs
from subspace.api import create_app
from subspace.api.errors import http_status
from subspace.commands import retry
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import SubspaceError
from subspace.ingest.outline import OutlineItem
from tests.conftest import serving

ROUNDS = 12


def _together(jobs: list[Callable[[], Any]]) -> list[BaseException]:
    """Run each job in a thread of its own, started at the same moment; their errors."""
    start = threading.Barrier(len(jobs))
    failures: list[BaseException] = []

    def run(job: Callable[[], Any]) -> None:
        start.wait()
        try:
            job()
        except BaseException as exc:  # every failure is the finding
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return failures


def test_page_and_bullet_writers_never_deadlock(database: Database, cx: Context) -> None:
    """A new page with bullets takes the page's statistics, then the bullets'; a bullet added
    to a page takes the bullets', then the page's (it bumps the page's version). Without one
    order, writers of both kinds at once deadlock within a few rounds."""
    shared = commands.create_page(cx, "Shared log")
    counts = database.write_retries
    before = (counts.retried, counts.gave_up)

    def pages(n: int) -> Callable[[], None]:
        def job() -> None:
            for i in range(ROUNDS):
                items = [OutlineItem(f"ferry step {n}.{i}.{k}", []) for k in range(3)]
                commands.create_page_from_outline(cx, f"Page {n}.{i}", items)

        return job

    def bullets(n: int) -> Callable[[], None]:
        def job() -> None:
            for i in range(ROUNDS):
                commands.add_node(cx, shared.id, f"ferry note {n}.{i}")

        return job

    failures = _together([pages(n) for n in range(3)] + [bullets(n) for n in range(3)])
    assert failures == []
    assert (counts.retried, counts.gave_up) == before, "a writer had to retry"
    with database.pool.connection() as conn:
        count = conn.execute(
            "select count(*) as n from kb.nodes where workspace_id = %s",
            (cx.actor.workspace_id,),
        ).fetchone()
    assert count is not None
    assert count["n"] == 3 * ROUNDS * 3 + 3 * ROUNDS


def test_questions_asked_at_once_share_one_questions_page(database: Database, cx: Context) -> None:
    failures = _together(
        [lambda n=n: runs.enqueue_run(cx, f"where is ferry {n}?", "rag") for n in range(6)]
    )
    assert failures == []
    with database.pool.connection() as conn:
        pages = conn.execute(
            "select id from kb.pages where workspace_id = %s and title = %s",
            (cx.actor.workspace_id, runs.QUESTIONS_PAGE),
        ).fetchall()
        asked = conn.execute(
            "select count(*) as n from kb.runs where workspace_id = %s", (cx.actor.workspace_id,)
        ).fetchone()
    assert len(pages) == 1
    assert asked is not None
    assert asked["n"] == 6


def test_a_command_that_loses_a_deadlock_runs_again(
    cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    @retry.retried
    def flaky(cx: Context, fail_times: int) -> str:
        calls.append(1)
        if len(calls) <= fail_times:
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return "written"

    monkeypatch.setattr(retry, "FIRST_PAUSE_S", 0.001)
    assert flaky(cx, 2) == "written"
    assert len(calls) == 3
    calls.clear()
    with pytest.raises(retry.WriteContention, match="4 times in a row") as refused:
        flaky(cx, 10)
    assert len(calls) == retry.ATTEMPTS
    assert isinstance(refused.value, SubspaceError)
    assert http_status(refused.value) == 503
    calls.clear()
    with cx.transaction() as conn, pytest.raises(psycopg.errors.DeadlockDetected):
        flaky(cx.on(conn), 1)  # bound to a caller's transaction: the caller runs it again
    assert len(calls) == 1


def _read_response(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 response (its body sized by content-length), or b"" if closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def test_a_500_answers_and_keeps_the_connection_open(
    database: Database, settings: Settings
) -> None:
    """A client that keeps its connection alive gets an answer to its next request after a
    500, not a connection reset."""
    app = create_app(settings, database)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("an error nobody planned for")

    with (
        serving(app, log_level="critical") as port,
        socket.create_connection(("127.0.0.1", port), timeout=10) as sock,
    ):
        sock.sendall(b"GET /boom HTTP/1.1\r\nhost: x\r\n\r\n")
        failed = _read_response(sock)
        assert failed.startswith(b"HTTP/1.1 500"), failed
        assert b'"code":"internal"' in failed
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        assert _read_response(sock).startswith(b"HTTP/1.1 200"), "the connection was dropped"


def _lose_a_deadlock(
    database: Database, cx: Context, page_id: Any, request: Callable[[], Any]
) -> Any:
    """Run `request` while a connection of the test holds the bullets' statistics row of the
    workspace and then asks for the page's row, which the request locks first: a real
    deadlock. The test waits longer before it looks for one, so the request's transaction is
    the one Postgres gives up."""
    ws = cx.actor.workspace_id
    answer: list[Any] = []
    with psycopg.connect(database.dsn, autocommit=False) as rival:
        rival.execute("set deadlock_timeout = '20s'")
        rival.execute(
            "select * from search.source_stats where workspace_id = %s and source = 'node' "
            "for update",
            (ws,),
        )
        thread = threading.Thread(target=lambda: answer.append(request()))
        thread.start()
        deadline = time.monotonic() + 30
        while not _someone_waits_for_a_lock(database) and time.monotonic() < deadline:
            time.sleep(0.05)  # the request holds the page and waits for the statistics
        rival.execute("select * from kb.pages where workspace_id = %s and id = %s for update",
                      (ws, page_id))  # fmt: skip
        rival.rollback()
        thread.join(60)
    return answer[0]


def _someone_waits_for_a_lock(database: Database) -> bool:
    with psycopg.connect(database.dsn) as conn:
        row = conn.execute(
            "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
            "and datname = current_database()"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.parametrize("route", ["add", "edit", "delete"])
def test_a_bullet_route_that_loses_a_deadlock_runs_again(
    database: Database, cx: Context, client: Any, route: str
) -> None:
    """The node routes write in a transaction of their own, run again whole when Postgres
    gives it up: a lost deadlock answers 2xx (or 503 with Retry-After), never 500."""
    page = commands.create_page(cx, "Contended")
    node = commands.add_node(cx, page.id, "a gull on the pier")
    requests = {
        "add": lambda: client.post("/api/nodes", json={"page_id": str(page.id), "text": "a tern"}),
        "edit": lambda: client.patch(f"/api/nodes/{node.id}", json={"text": "a tern on the pier"}),
        "delete": lambda: client.delete(f"/api/nodes/{node.id}"),
    }
    response = _lose_a_deadlock(database, cx, page.id, requests[route])
    assert response.status_code in (200, 201, 503), response.text
    assert database.write_retries.retried >= 1  # counted on this Database, not the process
    if response.status_code == 503:
        assert response.headers["retry-after"]
