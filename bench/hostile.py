"""How a running server holds up under the worst inputs we know: /healthz latency while they run.

Starts `subspace serve` on a fresh embedded Postgres in a temporary folder, polls /healthz every
50 ms from its own thread, and runs each attack in turn. Prints, per attack, the
status codes it got, how long it took, and the /healthz latency (p50, p95, max) while it ran.

    python bench/hostile.py [--slow-clients 1000] [--slow-hold 20] [--only TEXT] [--json]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx

HEALTH_INTERVAL_S = 0.05
SLOW_HOLD_S = 20.0  # how long the slow clients hold their half requests before they are counted


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A `subspace serve` subprocess on a temporary home."""

    def __init__(self, home: Path, port: int, env: dict[str, str] | None = None) -> None:
        """`env`: settings beside the defaults (PROVIDERS=fake), or in their place."""
        self.home, self.port = home, port
        self.base = f"http://127.0.0.1:{port}"
        env = {**os.environ, "SUBSPACE_HOME": str(home), "SUBSPACE_PORT": str(port),
               "PROVIDERS": "fake", "SUBSPACE_LOG_LEVEL": "warning", **(env or {})}  # fmt: skip
        self.log = (home / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "subspace", "serve", "--no-demo"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise SystemExit(f"the server did not start; see {home / 'server.log'}")
        made = subprocess.run(
            [sys.executable, "-m", "subspace", "keys", "create", "--name", "bench"],
            env=env, capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        token = made.stdout.strip().splitlines()[-1]
        self.client = httpx.Client(
            base_url=self.base, headers={"authorization": f"Bearer {token}"}, timeout=120
        )

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class HealthProbe:
    """Times /healthz every 50 ms on a fresh connection each time, as a load balancer would."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.samples: list[tuple[float, float, int]] = []  # (at, ms, status; 0 = no answer)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.perf_counter()
            connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
            try:
                connection.request("GET", "/healthz")
                status = connection.getresponse().status
            except OSError:
                status = 0
            finally:
                connection.close()
            self.samples.append((time.monotonic(), (time.perf_counter() - started) * 1000, status))
            self._stop.wait(HEALTH_INTERVAL_S)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def window(self, start: float, end: float) -> dict[str, float]:
        inside = [(ms, status) for at, ms, status in self.samples if start <= at <= end]
        times = sorted(ms for ms, _ in inside) or [0.0]
        return {
            "samples": len(inside),
            "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[math.ceil(0.95 * len(times)) - 1], 1),  # nearest rank
            "max_ms": round(times[-1], 1),
            "failed": sum(1 for _, status in inside if status != 200),
        }


# -- the attacks --------------------------------------------------------------------------------


def mail_html_prescan(server: Server) -> Counter[int]:
    """A mail whose HTML body is `<a` 40,000 times with no `>` (the quadratic pre-scan)."""
    body = "<a" * 40_000
    eml = (
        "From: a@example.com\r\nTo: b@example.com\r\nSubject: angle brackets\r\n"
        "Message-ID: <prescan@example.com>\r\nContent-Type: text/html\r\n\r\n" + body
    ).encode()
    response = server.client.post("/api/mail/import", files={"file": ("bomb.eml", eml)})
    return Counter([response.status_code])


def mail_nested_multipart(server: Server) -> Counter[int]:
    """A mail of 1,500 nested multipart parts (the parser's recursion)."""
    depth = 1_500
    head = "From: a@example.com\r\nSubject: nested\r\nMessage-ID: <nested@example.com>\r\n"
    parts = [
        f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n' for i in range(depth)
    ]
    tail = "".join(f"\r\n--b{i}--\r\n" for i in reversed(range(depth)))
    eml = (head + "".join(parts) + "Content-Type: text/plain\r\n\r\nhello" + tail).encode()
    response = server.client.post("/api/mail/import", files={"file": ("nested.eml", eml)})
    return Counter([response.status_code])


def cursor_bomb(server: Server) -> Counter[int]:
    """A cursor of zlib-compressed spaces that inflates to 1 GiB."""
    packer = zlib.compressobj(9)
    chunk = b" " * (1 << 24)
    packed = b"".join(packer.compress(chunk) for _ in range(64)) + packer.flush()
    cursor = base64.urlsafe_b64encode(packed).decode().rstrip("=")
    codes: Counter[int] = Counter()
    codes[server.client.post("/api/search", json={"query": "x", "cursor": cursor}).status_code] += 1
    codes[
        server.client.get("/api/grep", params={"pattern": "x", "cursor": cursor[:6000]}).status_code
    ] += 1
    return codes


def tag_filter_flood(server: Server) -> Counter[int]:
    """Twelve searches at once with 1,000 tag filters each (the pool's exhaustion)."""
    server.client.post("/api/tags", json={"name": "topic", "type": "text"})
    tags = [{"tag": "topic", "op": "eq", "value": f"v{i}"} for i in range(1_000)]
    return run_parallel(12, lambda: server.client.post(
        "/api/search", json={"query": "anything", "tags": tags}).status_code)  # fmt: skip


def hostile_html_files(server: Server) -> Counter[int]:
    """Two 400 KB hostile HTML files, then a tiny text file: when is the tiny one ready?"""
    hostile = ("<a" * 200_000).encode()
    codes: Counter[int] = Counter()
    for i in range(2):
        sent = server.client.post(
            "/api/files", files={"file": (f"h{i}.html", hostile, "text/html")}
        )
        codes[sent.status_code] += 1
    time.sleep(2)  # let the worker start on the hostile ones
    started = time.monotonic()
    tiny = server.client.post("/api/files", files={"file": ("tiny.txt", b"eighteen bytes ok\n")})
    codes[tiny.status_code] += 1
    file_id = tiny.json().get("id")
    while file_id and time.monotonic() - started < 300:
        if server.client.get(f"/api/files/{file_id}").json().get("status") != "processing":
            break
        time.sleep(0.1)
    print(f"  tiny text file ready after {time.monotonic() - started:.1f} s", file=sys.stderr)
    return codes


def slow_clients(server: Server, count: int, hold_s: float = SLOW_HOLD_S) -> Counter[int]:
    """`count` connections that send half a request line and then nothing for `hold_s`."""
    sockets: list[socket.socket] = []
    codes: Counter[int] = Counter()
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            sockets.append(sock)
        except OSError:
            codes[0] += 1
    time.sleep(hold_s)
    closed = 0
    for sock in sockets:
        # Closed means the server hung up (after its 408, if it sent one): read to the end.
        sock.settimeout(0.05)
        with contextlib.suppress(TimeoutError, OSError):
            while sock.recv(4096):
                pass
            closed += 1
        sock.close()
    codes[-1] = closed  # -1 counts the connections the server had closed after `hold_s`
    return codes


def run_parallel(count: int, call: Callable[[], int]) -> Counter[int]:
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(call())) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return Counter(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow-clients", type=int, default=1_000)
    parser.add_argument(
        "--slow-hold",
        type=float,
        default=SLOW_HOLD_S,
        help="seconds the slow clients hold their connections before they are counted",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="", help="Run only attacks whose name holds this text.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="subspace-hostile-") as tmp:
        server = Server(Path(tmp), free_port())
        probe = HealthProbe("127.0.0.1", server.port)
        probe.start()
        attacks: list[tuple[str, Callable[[], Counter[int]]]] = [
            ("idle", lambda: (time.sleep(2), Counter[int]())[1]),
            ("mail: <a x 40,000", lambda: mail_html_prescan(server)),
            ("mail: 1,500 nested parts", lambda: mail_nested_multipart(server)),
            ("cursor bomb (1 GiB inflated)", lambda: cursor_bomb(server)),
            ("12 searches x 1,000 tag filters", lambda: tag_filter_flood(server)),
            ("2 hostile 400 KB HTML files", lambda: hostile_html_files(server)),
            (
                f"{args.slow_clients} slow clients",
                lambda: slow_clients(server, args.slow_clients, args.slow_hold),
            ),
        ]
        report = []
        try:
            for name, attack in attacks:
                if args.only not in name and name != "idle":
                    continue
                started = time.monotonic()
                codes = attack()
                ended = time.monotonic()
                row = {"attack": name, "seconds": round(ended - started, 1),
                       "status": dict(codes), "healthz": probe.window(started, ended)}  # fmt: skip
                report.append(row)
                print(json.dumps(row), file=sys.stderr)
        finally:
            probe.stop()
            server.stop()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{'attack':34} {'s':>6}  {'status':24} healthz p50/p95/max ms (failed)")
    for row in report:
        h = row["healthz"]
        print(f"{row['attack']:34} {row['seconds']:>6}  {json.dumps(row['status']):24} "
              f"{h['p50_ms']}/{h['p95_ms']}/{h['max_ms']} ({h['failed']})")  # fmt: skip


if __name__ == "__main__":
    main()
