"""A real `subspace serve` under attack and being stopped: slow clients, signals, a crash,
and what its log may say."""

from __future__ import annotations

import functools
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from subspace.config import Settings
from subspace.logs import RedactFilter, RepeatFilter, redact
from tests.conftest import free_port, key_of_home


def postgres_pids(pgdata: Path) -> list[int]:
    """Postgres processes whose command line names `pgdata`: the postmaster of that data
    folder (not a `pg_ctl` or `pg_isready` run for it at that moment)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if name == "postgres" and str(pgdata.resolve()) in cmdline:
            found.append(int(entry.name))
    return found


def children_of(supervisor: int, role: str) -> list[int]:
    """The live processes of `role` (web, background) a supervisor started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in cmdline]
        ours = "subspace.processes" in words and role in words and state != "Z"
        if ours and words[words.index("--supervisor") + 1] == str(supervisor):
            found.append(int(entry.name))
    return found


def lower_file_limit() -> None:
    """The soft limit on open files most systems start a shell with."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1_024, hard), hard))


class Served:
    """`subspace serve --no-demo` in a subprocess, its output collected as it comes: on an
    embedded Postgres of its own under `home`, or where SUBSPACE_DATABASE_URL says (the tests
    of the HTTP server alone, which need no server of their own)."""

    def __init__(self, home: Path, *, low_file_limit: bool = False, **env: str) -> None:
        self.port = free_port()
        self.home = home
        environ = {
            k: v for k, v in os.environ.items() if not k.startswith(("SUBSPACE_", "PROVIDERS"))
        }
        environ.update(
            {"SUBSPACE_HOME": str(home), "SUBSPACE_PORT": str(self.port), "PROVIDERS": "fake"}
        )
        environ.update(env)
        self.environ = environ
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "subspace", "serve", "--no-demo"],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=lower_file_limit if low_file_limit else None,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        # One client for every attempt: each new one loads the system's certificates (~25 ms).
        with httpx.Client(timeout=2) as client:
            while True:
                try:
                    client.get(f"{self.url}/healthz").raise_for_status()
                    break
                except httpx.TransportError:
                    assert self.proc.poll() is None, self.output
                    assert time.monotonic() < deadline, self.output
                    time.sleep(0.2)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    @functools.cached_property
    def token(self) -> str:
        """An API key of the served home, made when first asked for."""
        return key_of_home(self.environ)

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()  # no server outlives a failed test (its processes die with it)
            raise
        self._reader.join(timeout=5)
        return code

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)  # reaped: a zombie would still look like a holder
        self._reader.join(timeout=5)


@pytest.fixture
def home() -> Iterator[Path]:
    # Not under pytest's temporary folder: as root, the embedded Postgres runs as another
    # user, and every pytest session that starts sets that folder back to mode 0700.
    folder = Path(tempfile.mkdtemp(prefix="subspace-lifecycle-"))
    yield folder / "home"
    for pid in postgres_pids(folder / "home" / "pg"):  # whatever a failed test left behind
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_server_and_its_postgres(home: Path, sig: signal.Signals) -> None:
    served = Served(home)
    assert postgres_pids(home / "pg")
    assert len(children_of(served.proc.pid, "web")) == os.cpu_count(), served.output
    assert served.stop(sig) == 0, served.output
    assert "Subspace stopped." in served.output
    assert children_of(served.proc.pid, "web") == []
    assert children_of(served.proc.pid, "background") == []
    assert postgres_pids(home / "pg") == []
    assert not (home / "pg" / "postmaster.pid").exists()


@pytest.mark.slow
def test_after_a_crash_the_next_server_adopts_postgres_and_stops_it(home: Path) -> None:
    crashed = Served(home)
    crashed.kill()
    left = postgres_pids(home / "pg")
    assert left, "the embedded Postgres outlives a killed server"
    again = Served(home)
    assert postgres_pids(home / "pg") == left  # adopted, not started twice
    token = again.token
    pages = httpx.get(f"{again.url}/api/pages", headers={"authorization": f"Bearer {token}"})
    assert pages.status_code == 200
    assert again.stop(signal.SIGINT) == 0, again.output
    assert "Subspace stopped." in again.output
    assert postgres_pids(home / "pg") == []


def partial_request(port: int) -> socket.socket:
    """A connection that sends half a request line and then nothing."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: loc")
    return sock


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass  # a 408 may come first
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def busy_request(port: int, token: str) -> socket.socket:
    """A connection whose request is being answered: its body is still to come."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /api/pages HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n"
        b"authorization: Bearer " + token.encode() + b"\r\ncontent-length: 100\r\n\r\n{"
    )
    return sock


@pytest.mark.slow
def test_slow_clients_are_closed_and_the_server_keeps_answering(
    home: Path, settings: Settings
) -> None:
    served = Served(
        home,
        low_file_limit=True,
        SUBSPACE_DATABASE_URL=settings.database_url,
        SUBSPACE_HEADER_TIMEOUT_S="2",
        SUBSPACE_KEEP_ALIVE_S="30",
        SUBSPACE_MAX_CONNECTIONS="60",
        SUBSPACE_WORKERS="1",  # the cap is each web process's: one, to count on it here
    )
    try:
        slow = [partial_request(served.port) for _ in range(50)]
        # One more sends a whole request, reads the answer, then starts another and stalls.
        kept = socket.create_connection(("127.0.0.1", served.port))
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        kept.settimeout(5)
        assert kept.recv(4096).startswith(b"HTTP/1.1 200")
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        slow.append(kept)
        # And one is answered before its body has come, which then never does. It is the last
        # to connect, so none may be closed before 2 s from now (its deadline).
        last_connected = time.monotonic()
        unread = socket.create_connection(("127.0.0.1", served.port))
        unread.sendall(b"POST /healthz HTTP/1.1\r\nHost: localhost\r\ncontent-length: 9\r\n\r\n{")
        unread.settimeout(5)
        assert unread.recv(4096).startswith(b"HTTP/1.1 405")
        slow.append(unread)
        opened = time.monotonic()
        # Meanwhile the server answers, over and over.
        for _ in range(5):
            assert httpx.get(f"{served.url}/healthz", timeout=2).json() == {"status": "ok"}
        assert time.monotonic() - opened < 2
        assert all(closed_by_server(sock, timeout=5) for sock in slow)
        assert time.monotonic() - last_connected >= 1.5  # not before the deadline
        for sock in slow:
            sock.close()

        # At the cap, a new connection closes the one that has waited longest for a request.
        held = [partial_request(served.port) for _ in range(60)]
        time.sleep(0.3)
        assert httpx.get(f"{served.url}/healthz", timeout=2).status_code == 200
        held[0].settimeout(1)
        assert held[0].recv(4096).startswith(b"HTTP/1.1 408")
        held[1].settimeout(0.2)
        with pytest.raises(TimeoutError):
            held[1].recv(4096)
        for sock in held:
            sock.close()
        time.sleep(0.3)

        # When every connection is busy answering a request, a new one is answered 503.
        busy = [busy_request(served.port, served.token) for _ in range(60)]
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", served.port))
        extra.settimeout(5)
        assert extra.recv(4096).startswith(b"HTTP/1.1 503")
        for sock in [*busy, extra]:
            sock.close()

        limits = Path(f"/proc/{served.proc.pid}/limits").read_text()
        line = next(line for line in limits.splitlines() if line.startswith("Max open files"))
        soft, hard = line.split()[3:5]
        assert soft == hard, line
    finally:
        assert served.stop() == 0, served.output


@pytest.mark.slow
def test_the_access_log_shows_no_credentials(home: Path, settings: Settings) -> None:
    served = Served(home, SUBSPACE_DATABASE_URL=settings.database_url)
    token = served.token
    code = next(line for line in served.lines if line.startswith("Sign in: ")).split("code=")[1]
    try:
        httpx.get(f"{served.url}/signin?code={code.strip()}")
        httpx.get(f"{served.url}/?token={token}")
        httpx.get(f"{served.url}/healthz?key=k-123&api_key=a-456&n=1")
        httpx.get(f"{served.url}/api/pages", headers={"authorization": f"Bearer {token}"})
    finally:
        assert served.stop() == 0
    log = served.output.split("Sign in: ", 1)[1].split("\n", 1)[1]
    assert '"GET /signin?code=[redacted] HTTP/1.1"' in log
    assert '"GET /?token=[redacted] HTTP/1.1"' in log
    assert '"GET /healthz?key=[redacted]&api_key=[redacted]&n=1 HTTP/1.1"' in log
    assert token not in log and code.strip() not in log
    assert "k-123" not in log
    assert "a-456" not in log


# -- the log filters on their own ---------------------------------------------------------------


def record(msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord("uvicorn.error", level, __file__, 1, msg, args, None)


def test_repeated_records_are_let_through_a_few_at_a_time() -> None:
    now = [0.0]
    limit = RepeatFilter(burst=3, window_s=60, clock=lambda: now[0])
    passed = [limit.filter(r) for r in [record("accept failed: %s", "EMFILE") for _ in range(10)]]
    assert passed == [True] * 3 + [False] * 7
    # Another message, or the same at another level, has its own count.
    assert limit.filter(record("accept failed: %s", "ENFILE"))
    assert limit.filter(record("accept failed: %s", "EMFILE", level=logging.WARNING))
    now[0] = 59.9
    assert not limit.filter(record("accept failed: %s", "EMFILE"))
    now[0] = 60.0
    first = record("accept failed: %s", "EMFILE")
    assert limit.filter(first)
    assert first.getMessage() == (
        "accept failed: EMFILE [8 identical records dropped in the last 60 s]"
    )


def test_the_last_record_let_through_says_repeats_will_be_dropped() -> None:
    limit = RepeatFilter(burst=2, window_s=30, clock=lambda: 0.0)
    first, second = record("boom"), record("boom")
    assert limit.filter(first)
    assert limit.filter(second)
    assert first.getMessage() == "boom"
    assert "identical records are dropped for the rest of 30 s" in second.getMessage()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            '127.0.0.1:5 - "GET /?token=ssk_ab_cd-EF HTTP/1.1" 303',
            '127.0.0.1:5 - "GET /?token=[redacted] HTTP/1.1" 303',
        ),
        ("GET /x?a=1&KEY=s3cret&api_key=zz#f", "GET /x?a=1&KEY=[redacted]&api_key=[redacted]#f"),
        ("Authorization: Bearer abc.def", "Authorization: [redacted]"),
        ("{'authorization': 'Basic dXNlcg=='}", "{'authorization': '[redacted]'}"),
        ("(b'authorization', b'Bearer xyz')", "(b'authorization', b'[redacted]')"),
        ("bad key ssk_0123_secret given", "bad key [redacted] given"),
        ("the key was revoked", "the key was revoked"),
    ],
)
def test_redact(line: str, expected: str) -> None:
    assert redact(line) == expected


def test_redaction_covers_arguments_and_tracebacks() -> None:
    try:
        raise ValueError("bad url /?token=ssk_1_2")
    except ValueError:
        rec = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "%s %s", ("GET", "/?token=t0k"), sys.exc_info()
        )
    assert RedactFilter().filter(rec)
    text = logging.Formatter().format(rec)
    assert text.startswith("GET /?token=[redacted]\nTraceback")
    assert "ValueError: bad url /?token=[redacted]" in text
    assert "t0k" not in text
    assert "ssk_1_2" not in text
