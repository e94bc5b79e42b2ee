"""`subspace serve` as several processes: whichever web process a request reaches serves the
same sessions, sign-in limits, MCP, event streams and metrics; the background work runs in
one elected process and is taken over when it dies; a stop leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from subspace.api.auth import COOKIE_NAME
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.locks import BACKGROUND_LOCK_KEY
from subspace.processes import BACKGROUND_NICENESS
from subspace.web.signin import MAX_FAILURES
from tests.security.test_signin import new_code
from tests.surfaces.test_lifecycle import Served, children_of, home  # noqa: F401 - the fixture
from tests.surfaces.test_priority import thread_niceness

pytestmark = pytest.mark.slow


def serving_pid(response: httpx.Response, candidates: list[int]) -> int:
    """Which of `candidates` holds the server's end of the connection `response` came on."""
    _, client_port = response.extensions["network_stream"].get_extra_info("client_addr")
    sockets = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[2].split(":")[1], 16) == client_port:  # remote end: the client's port
            sockets.add(f"socket:[{fields[9]}]")
    for pid in candidates:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) in sockets:
                    return pid
            except OSError:
                continue
    raise AssertionError(f"no process of {candidates} holds the connection from {client_port}")


@contextmanager
def two_processes(served: Served) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two keep-alive clients whose connections two different web processes serve."""
    web = children_of(served.proc.pid, "web")
    assert len(web) == 2, served.output
    clients: dict[int, httpx.Client] = {}
    sent = 0
    try:
        while len(clients) < 2:
            assert sent < 200, "the kernel gave every connection to one process"
            client = httpx.Client(base_url=served.url, timeout=10, follow_redirects=False)
            answered = client.get("/healthz")
            sent += 1
            pid = serving_pid(answered, web)
            if pid in clients:
                client.close()
            else:
                clients[pid] = client
        a, b = clients.values()
        yield a, b
    finally:
        for client in clients.values():
            client.close()


def claim_on_cores(pid: int) -> tuple[bool, int, int | None]:
    """Whether `pid` leads a session of its own, its niceness, and its session's autogroup
    niceness (None on a kernel without autogroups)."""
    niceness = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    try:
        group = int(Path(f"/proc/{pid}/autogroup").read_text().split("nice")[1])
    except FileNotFoundError:
        group = None
    return os.getsid(pid) == pid, niceness, group


def http_requests(metrics: str, route: str) -> float:
    """subspace_http_requests_total of `route`, every method and status summed."""
    pattern = rf'^subspace_http_requests_total\{{[^}}]*route="{re.escape(route)}"[^}}]*\}} (\S+)$'
    return sum(float(v) for v in re.findall(pattern, metrics, flags=re.M))


def test_any_web_process_serves_the_same_sessions_limits_mcp_streams_and_metrics(
    home: Path,  # noqa: F811 - the fixture
    settings: Settings,
    database: Database,
    cx: Context,
) -> None:
    served = Served(home, SUBSPACE_DATABASE_URL=settings.database_url, SUBSPACE_WORKERS="2")
    try:
        with two_processes(served) as (a, b):
            # A session begun on one process is the session of the other.
            signed = a.post("/signin", data={"code": new_code(database, cx)})
            assert signed.status_code == 303, signed.text
            cookie = {COOKIE_NAME: signed.cookies[COOKIE_NAME]}
            b.cookies.update(cookie)
            assert b.get("/api/sessions").status_code == 200
            b.cookies.clear()

            # Failed sign-ins count together: half on each process reach the limit.
            workspace = cx.actor.workspace_id.hex
            for n in range(MAX_FAILURES):
                failed = (a if n % 2 else b).post("/signin", data={"code": f"ssc_{workspace}_{n}"})
                assert failed.status_code == 401
            limited = a.post("/signin", data={"code": new_code(database, cx)})
            assert limited.status_code == 429, limited.text

            # MCP over HTTP: one process initialises, the other lists the tools.
            keyed = {"authorization": f"Bearer {served.token}",
                     "accept": "application/json, text/event-stream"}  # fmt: skip
            hello = {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "test", "version": "1"}}  # fmt: skip
            initialized = a.post("/mcp", headers=keyed,
                                 json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                       "params": hello})  # fmt: skip
            assert initialized.status_code == 200, initialized.text
            listed = b.post("/mcp", headers=keyed,
                            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # fmt: skip
            assert listed.status_code == 200, listed.text
            assert listed.json()["result"]["tools"]

            # A question asked on one process streams its events on the other, answered by
            # the background process.
            question = {"question": "what is here?", "strategy": "rag-direct"}
            asked = a.post("/api/ask", headers=keyed, json=question)
            assert asked.status_code == 202, asked.text
            events = []
            with b.stream("GET", asked.json()["events"], headers=keyed, timeout=60) as stream:
                for line in stream.iter_lines():
                    if line.startswith("event: "):
                        events.append(line.removeprefix("event: "))
                    if events and events[-1] == "done":
                        break
            assert events[-1] == "done", events

            # /metrics on either process counts the requests both answered.
            time.sleep(1.5)  # each process writes its figures every second
            before = http_requests(a.get("/metrics").text, "/healthz")
            for client in (a, b):
                for _ in range(5):
                    assert client.get("/healthz").status_code == 200
            time.sleep(1.5)
            for client in (a, b):
                metrics = client.get("/metrics")
                assert metrics.status_code == 200
                assert http_requests(metrics.text, "/healthz") == before + 10
    finally:
        assert served.stop() == 0, served.output
    assert children_of(served.proc.pid, "web") == []
    assert children_of(served.proc.pid, "background") == []


def test_each_process_is_a_session_of_its_own_and_the_background_yields_the_cores(
    home: Path,  # noqa: F811 - the fixture
    settings: Settings,
) -> None:
    """Postgres makes each backend a session, and Linux shares the cores between sessions
    first (priority.py): each web process is one too, at full claim, and the background
    process's session claims less."""
    served = Served(home, SUBSPACE_DATABASE_URL=settings.database_url, SUBSPACE_WORKERS="2")
    try:
        web = children_of(served.proc.pid, "web")
        (background,) = children_of(served.proc.pid, "background")
        assert [claim_on_cores(pid)[:2] for pid in web] == [(True, 0), (True, 0)]
        leads, niceness, group = claim_on_cores(background)
        assert (leads, niceness) == (True, BACKGROUND_NICENESS)
        assert group in (None, BACKGROUND_NICENESS)
        assert all(claim_on_cores(pid)[2] in (None, 0) for pid in web)
        # every thread of it, numpy's started at import included
        assert thread_niceness(background) == {BACKGROUND_NICENESS}
    finally:
        assert served.stop() == 0, served.output


def lock_holder(dsn: str) -> int | None:
    """The backend holding BACKGROUND_LOCK_KEY, if one does."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select pid from pg_locks where locktype = 'advisory' and granted "
            "and ((classid::bigint << 32) | objid::bigint) = %s",
            (BACKGROUND_LOCK_KEY,),
        ).fetchone()
    return None if row is None else int(row[0])


def wait_for(what: str, check: object, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.1)


def test_one_process_runs_the_background_work_and_another_takes_it_over(
    home: Path,  # noqa: F811 - the fixture
    settings: Settings,
) -> None:
    served = Served(home, SUBSPACE_DATABASE_URL=settings.database_url, SUBSPACE_WORKERS="1")
    dsn = settings.database_url
    # A second candidate, as another host's server would run: it waits while one is elected.
    rival = subprocess.Popen(
        [sys.executable, "-m", "subspace.processes", "background", "--supervisor",
         str(os.getpid())],
        env=served.environ, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for("a background process elected", lambda: lock_holder(dsn) is not None)
        [elected] = children_of(served.proc.pid, "background")
        first_holder = lock_holder(dsn)
        time.sleep(2)  # the rival has tried the lock a few times meanwhile
        assert lock_holder(dsn) == first_holder

        os.kill(elected, signal.SIGKILL)
        started = time.monotonic()
        wait_for("the work taken over", lambda: lock_holder(dsn) not in (None, first_holder))
        print(f"taken over in {time.monotonic() - started:.1f} s")
        # The supervisor starts a new background process, which now waits in its turn.
        wait_for("a new background process", lambda: children_of(served.proc.pid, "background"))

        # The work goes on: an upload is extracted by whichever process was elected.
        keyed = {"authorization": f"Bearer {served.token}"}
        upload = {"file": ("notes.txt", b"harbour ferry timetable")}
        uploaded = httpx.post(f"{served.url}/api/files", headers=keyed, files=upload)
        assert uploaded.status_code in (200, 201, 202), uploaded.text
        file_id = uploaded.json()["id"]

        def extracted() -> bool:
            got = httpx.get(f"{served.url}/api/files/{file_id}", headers=keyed).json()
            return bool(got["status"] == "ready")

        wait_for("the upload extracted", extracted)
    finally:
        rival.terminate()
        rival.wait(timeout=30)
        assert served.stop() == 0, served.output


def test_the_metrics_of_a_dead_process_keep_their_counts() -> None:
    """Counters of a process gone stay counted (a counter never goes down); its gauges go."""
    from subspace.api.metrics_files import all_processes

    text = (
        "# HELP c_total Requests.\n# TYPE c_total counter\nc_total 3.0\n"
        "# HELP g Pool size.\n# TYPE g gauge\ng 10.0\n"
    )
    with pytest.MonkeyPatch.context() as patch, _folder() as folder:
        (folder / "999999999.prom").write_text(text)  # no such process
        patch.setattr(os, "getpid", lambda: 1)  # "this" process: init, alive
        summed = all_processes(folder, text.encode()).decode()
    assert re.search(r"^c_total 6\.0$", summed, re.M), summed
    assert re.findall(r"^g\{(.*)\} (.*)$", summed, re.M) == [('process="1"', "10.0")], summed


@contextmanager
def _folder() -> Iterator[Path]:
    import tempfile

    with tempfile.TemporaryDirectory() as name:
        yield Path(name)
