"""Two tenants on one server: what a normal workspace meets while another attacks it, and 50
clients of mixed reads and writes.

Starts `subspace serve` (fake provider) on a fresh embedded Postgres in a temporary folder,
with two workspaces, "Normal" and "Hostile", each seeded with PAGES pages of BULLETS bullets
over the API. /healthz is timed every 50 ms throughout on a fresh connection (bench/hostile.py's
probe). Then, for SECONDS each:

1. baseline: the normal tenant alone, CLIENTS_NORMAL clients sending its mix with a pause of
   NORMAL_PAUSE_S after each request (a hybrid search of two words, reading the page list,
   adding a bullet);
2. each attack of the hostile tenant, with the normal tenant's clients running the same mix:
   long queries (150 distinct words of its pages, 10 at once), event streams and GET /mcp
   held open (300 sockets), mail uploads whose Subject is 100,000 encoded words (12 at once),
   writers that deadlocked before (asks without a page beside bullet writers), and slow
   questions queued (20 /rag-direct asks);
3. mixed: 50 users, half per tenant, the normal mix paced as people use the app (each sends
   a request, waits for it, then pauses until PACE_S has passed since it sent it, starting at
   a random moment of the first PACE_S), no attack.

Latencies are of the requests answered (2xx to 4xx but 429); 429s and failures are counted
apart, in `statuses` and `errors`. Each attack runs in a process of its own, on the same
cores, as an attacker's own machine would send it: as threads of this process, its Python
(12 clients encoding 1.8 MB bodies, or writing back to back) would take turns at this
interpreter with the normal tenant's clients, and their timings would hold that wait too.

Prints, per phase, the normal tenant's p50/p95/p99 and errors, the attacker's status codes,
/healthz's p95 and failures, how many requests ran on niced backends because their
workspace flooded the server (`flooded`) and at how many checkpoints they waited for the
other's requests (`stepped_aside`); with --json the same as one object.

    python bench/tenants.py [--seconds 60] [--bullets 150] [--only baseline mixed …] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, NamedTuple

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.hostile import HealthProbe, Server, free_port

PAGES = 4
BULLETS = 150
CLIENTS_NORMAL = 2
# A normal tenant is people at work, not a load generator: each of its clients pauses this
# long between requests (about 20 requests a second in all), so its unloaded latency is the
# server's, not that of a machine its own clients already fill.
NORMAL_PAUSE_S = 0.1
PACE_S = 1.0  # a mixed user sends about one request a second
WORDS = (
    "harbor ferry schedule ticket crew engine harbour pier cargo manifest weather tide "
    "captain deck lantern rope anchor compass chart voyage island lighthouse beacon storm "
    "sail mast hull keel rudder galley cabin port starboard bow stern knot buoy dock wharf "
    "quay berth channel strait reef shoal current drift swell wave gale breeze fog mist"
).split()


def cli(home: Path, *args: str) -> str:
    env = {**os.environ, "SUBSPACE_HOME": str(home), "PROVIDERS": "fake"}
    done = subprocess.run(
        [sys.executable, "-m", "subspace", *args], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"subspace {' '.join(args)} failed: {done.stderr}")
    return done.stdout


class Endpoint(NamedTuple):
    """Where a server listens, as an attack's own process is given it (a Server holds the
    server's process and its log, which do not cross to another process)."""

    base: str
    port: int


def client(server: Server | Endpoint, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.base, headers={"authorization": f"Bearer {token}"}, timeout=30
    )


def seed(server: Server, token: str, seed_n: int, bullets: int = BULLETS) -> list[str]:
    """PAGES pages of `bullets` bullets of harbour words; returns the page ids."""
    rng = random.Random(seed_n)
    ids = []
    with client(server, token) as http:
        for p in range(PAGES):
            page = http.post("/api/pages", json={"title": f"Harbor log {p}"}).json()
            ids.append(page["id"])
            for _ in range(bullets):
                text = " ".join(rng.choice(WORDS) for _ in range(12))
                http.post("/api/nodes", json={"page_id": page["id"], "text": text})
    return ids


Sample = tuple[float, int, str]  # (ms, status, what was asked: search, list or write)


class Clients:
    """Threads sending `mix` back to back until stopped; each keeps a Sample per request."""

    def __init__(
        self, count: int, make: Callable[[int], Callable[[], tuple[int, str]]],
        pause_s: float = 0.0,
        pace_s: float = 0.0,
    ) -> None:  # fmt: skip
        """`pause_s` after each request; or, with `pace_s`, until `pace_s` has passed since
        it was sent (the first sent at a random moment of the first `pace_s`)."""
        self.pause_s, self.pace_s = pause_s, pace_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(make(n),), daemon=True) for n in range(count)
        ]

    def _run(self, request: Callable[[], tuple[int, str]]) -> None:
        if self.pace_s:
            self._stop.wait(random.random() * self.pace_s)
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                status, kind = request()
            except httpx.HTTPError:
                status, kind = 0, "failed"
            took = time.perf_counter() - started
            with self._lock:
                self.samples.append((took * 1000, status, kind))
            self._stop.wait(max(0.0, self.pace_s - took) if self.pace_s else self.pause_s)

    def __enter__(self) -> Clients:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)


def normal_mix(
    server: Server, token: str, pages: list[str]
) -> Callable[[int], Callable[[], tuple[int, str]]]:
    def make(n: int) -> Callable[[], tuple[int, str]]:
        http = client(server, token)
        rng = random.Random(n)
        turn = iter(range(10**9))

        def request() -> tuple[int, str]:
            step = next(turn) % 3
            if step == 0:
                query = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
                return http.post("/api/search", json={"query": query}).status_code, "search"
            if step == 1:
                return http.get("/api/pages").status_code, "list"
            body = {"page_id": rng.choice(pages), "text": f"note {rng.random()}"}
            return http.post("/api/nodes", json=body).status_code, "write"

        return request

    return make


def percentiles(samples: list[Sample]) -> dict[str, Any]:
    """Of the requests answered (neither 429, 5xx nor no answer at all); `p95_by_kind` is
    each kind of request's own p95."""
    answered = [(ms, kind) for ms, status, kind in samples if 0 < status < 500 and status != 429]

    def rank(times: list[float], q: float) -> float:
        times = sorted(times) or [0.0]
        return round(times[max(0, math.ceil(q * len(times)) - 1)], 1)

    times = [ms for ms, _ in answered]
    kinds = sorted({kind for _, kind in answered})
    return {
        "requests": len(samples),
        "p50_ms": rank(times, 0.5),
        "p95_ms": rank(times, 0.95),
        "p99_ms": rank(times, 0.99),
        "p95_by_kind": {k: rank([ms for ms, kind in answered if kind == k], 0.95) for k in kinds},
        "errors": sum(1 for _, status, _ in samples if status == 0 or status >= 500),
        "statuses": dict(Counter(status for _, status, _ in samples)),
    }


# -- the attacks: each runs until `stop` is set, and counts the statuses it got --------------


Send = Callable[[httpx.Client, int, int], httpx.Response]  # (client, thread, round) -> reply


def hammer(
    server: Endpoint, token: str, stop: Event, codes: Counter[int], clients: int,
    send: Send,
) -> None:  # fmt: skip
    """`clients` threads calling `send` back to back until `stop`, counting the statuses."""

    def one(n: int) -> None:
        with client(server, token) as http:
            k = 0
            while not stop.is_set():
                k += 1
                try:
                    codes[send(http, n, k).status_code] += 1
                except httpx.HTTPError:
                    codes[0] += 1

    threads = [threading.Thread(target=one, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def long_queries(server: Endpoint, token: str, stop: Event, codes: Counter[int]) -> None:
    words = [f"{a}{b}" for a in WORDS[:15] for b in ("", "s", "ed", "ing", "er", "ly", "x", "y",
             "z", "q")]  # fmt: skip
    query = " ".join(words[:150])
    hammer(server, token, stop, codes, 10, lambda http, n, k: http.post(
        "/api/search", json={"query": query}))  # fmt: skip


def held_streams(server: Endpoint, token: str, stop: Event, codes: Counter[int]) -> None:
    """300 sockets asking for streams (GET /mcp and run events), read and held open."""
    with client(server, token) as http:
        run_id = http.post("/api/ask", json={"question": "harbor ferry?"}).json()["run_id"]
    sockets = []
    for n in range(300):
        path = "/mcp" if n % 2 else f"/api/runs/{run_id}/events"
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(
            f"GET {path} HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n"
            f"authorization: Bearer {token}\r\n\r\n".encode()
        )
        try:
            head = sock.recv(200).split(b" ", 2)
            codes[int(head[1]) if len(head) > 1 else 0] += 1
        except OSError:
            codes[0] += 1
        sockets.append(sock)
    stop.wait()
    for sock in sockets:
        sock.close()


def mail_bombs(server: Endpoint, token: str, stop: Event, codes: Counter[int]) -> None:
    words = b" ".join([b"=?utf-8?b?w6k=?="] * 100_000)

    def send(http: httpx.Client, n: int, k: int) -> httpx.Response:
        raw = b"Message-ID: <bomb-%d-%d@x>\r\nFrom: a@x\r\nSubject: %s\r\n\r\nbody\r\n" % (
            n, k, words)  # fmt: skip
        return http.post("/api/mail/import", files={"file": ("bomb.eml", raw, "message/rfc822")})

    hammer(server, token, stop, codes, 12, send)


def lock_writers(server: Endpoint, token: str, stop: Event, codes: Counter[int]) -> None:
    """Asks without a page (filed on the Questions page) beside bullet writers."""
    with client(server, token) as http:
        page = http.post("/api/pages", json={"title": "Contended"}).json()["id"]

    def send(http: httpx.Client, n: int, k: int) -> httpx.Response:
        if n < 4:
            return http.post("/api/ask", json={"question": f"ferry {k}?"})
        return http.post("/api/nodes", json={"page_id": page, "text": f"w {k}"})

    hammer(server, token, stop, codes, 12, send)


def slow_questions(server: Endpoint, token: str, stop: Event, codes: Counter[int]) -> None:
    with client(server, token) as http:
        for n in range(20):
            body = {"question": f"harbor ferry crew deck {n}?", "strategy": "rag-direct"}
            codes[http.post("/api/ask", json=body).status_code] += 1
    stop.wait()


ATTACKS = {
    "long queries": long_queries,
    "held streams": held_streams,
    "mail bombs": mail_bombs,
    "lock writers": lock_writers,
    "slow questions": slow_questions,
}


def run_attack(
    name: str, server: Endpoint, token: str, started: Event, stop: Event, out: Queue[dict[int, int]]
) -> None:
    """The attack `name` in the process this runs in, from `started` until `stop`; its status
    counts are put on `out` whatever ends it."""
    codes: Counter[int] = Counter()
    started.set()
    try:
        ATTACKS[name](server, token, stop, codes)
    finally:
        out.put(dict(codes))


class Attack:
    """The attack `name` on `server` as `token`, in a process of its own while entered (on
    entry it has begun); its status counts in `codes` once it has ended."""

    def __init__(self, name: str, server: Server, token: str) -> None:
        spawn = multiprocessing.get_context("spawn")  # not fork: this process runs threads
        self._started, self._stop, self._out = spawn.Event(), spawn.Event(), spawn.Queue()
        endpoint = Endpoint(server.base, server.port)
        self._process = spawn.Process(
            target=run_attack,
            args=(name, endpoint, token, self._started, self._stop, self._out),
        )
        self.codes: dict[int, int] = {}

    def __enter__(self) -> Attack:
        self._process.start()
        if not self._started.wait(timeout=60):
            self._process.kill()
            raise SystemExit("an attack's process did not start")
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        try:
            self.codes = self._out.get(timeout=120)
        finally:
            self._process.join(timeout=10)
            if self._process.is_alive():
                self._process.kill()


def flood_counts(server: Server) -> Counter[str]:
    """How the server has made floods yield (`/metrics`, summed over the web processes; each
    writes its figures every second): `flooded`, requests run on niced backends because
    their workspace flooded it; `stepped_aside`, checkpoints at which such a request waited
    for the other workspace's requests running in its process."""
    time.sleep(1.5)
    text = httpx.get(f"{server.base}/metrics", timeout=10).text
    counts: Counter[str] = Counter()
    for name, metric in (
        ("flooded", "subspace_flooding_requests_total"),
        ("stepped_aside", "subspace_flood_steps_aside_total"),
    ):
        values = [line.rsplit(" ", 1)[1] for line in text.splitlines() if line.startswith(metric)]
        if not values:
            raise SystemExit(f"/metrics has no {metric}")
        counts[name] = sum(int(float(value)) for value in values)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--bullets", type=int, default=BULLETS, help="per page of each tenant")
    parser.add_argument(
        "--only", nargs="*", default=None, help="phases to run (baseline, an attack's name, mixed)"
    )
    args = parser.parse_args()
    wanted = set(args.only) if args.only is not None else None
    home = Path(tempfile.mkdtemp(prefix="subspace-tenants-")) / "home"
    cli(home, "migrate")  # the home's database, with its default workspace ("Normal")
    cli(home, "workspaces", "create", "Hostile")
    normal = cli(home, "keys", "create", "--name", "normal").strip().splitlines()[-1]
    hostile = cli(home, "keys", "create", "--name", "hostile", "--workspace", "Hostile")
    hostile = hostile.strip().splitlines()[-1]
    server = Server(home, free_port())
    probe = HealthProbe("127.0.0.1", server.port)
    result: dict[str, Any] = {}
    try:
        normal_pages = seed(server, normal, 1, args.bullets)
        hostile_pages = seed(server, hostile, 2, args.bullets)
        probe.start()
        time.sleep(5)  # the indexer catches up with the seed
        mix = normal_mix(server, normal, normal_pages)

        def phase(name: str, run: Callable[[], dict[str, Any]]) -> None:
            if wanted is not None and name.split()[0] not in wanted and name not in wanted:
                return
            started, floods = time.monotonic(), flood_counts(server)
            found = run()
            found["healthz"] = probe.window(started, time.monotonic())
            found.update({name: n - floods[name] for name, n in flood_counts(server).items()})
            result[name] = found
            if not args.json:
                print(name, json.dumps(found))

        def alone() -> dict[str, Any]:
            with Clients(CLIENTS_NORMAL, mix, NORMAL_PAUSE_S) as normal_clients:
                time.sleep(args.seconds)
            return {"normal": percentiles(normal_clients.samples)}

        phase("baseline", alone)
        for name in ATTACKS:

            def attacked(name: str = name) -> dict[str, Any]:
                with Attack(name, server, hostile) as attack:
                    time.sleep(1)  # the attack under way
                    with Clients(CLIENTS_NORMAL, mix, NORMAL_PAUSE_S) as normal_clients:
                        time.sleep(args.seconds)
                return {"normal": percentiles(normal_clients.samples), "attacker": attack.codes}

            phase(name, attacked)
            if wanted is None or name in wanted:
                time.sleep(3)  # what the attack left running settles

        hostile_mix = normal_mix(server, hostile, hostile_pages)

        def mixed() -> dict[str, Any]:
            with (
                Clients(25, mix, pace_s=PACE_S) as ours,
                Clients(25, hostile_mix, pace_s=PACE_S) as theirs,
            ):
                time.sleep(args.seconds)
            return {
                "normal": percentiles(ours.samples),
                "all": percentiles(ours.samples + theirs.samples),
            }

        phase("mixed 50 users", mixed)
    finally:
        probe.stop()
        server.stop()
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
