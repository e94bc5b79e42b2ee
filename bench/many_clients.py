"""Many people searching one server at once, in the two ways people load it.

- **closed loop** (throughput): CLIENTS clients each send a search, read the answer and send
  the next at once, for SECONDS; searches a second answered 200, and their latency.
- **paced** (latency): CLIENTS searchers each send a search, wait for it, then pause until a
  second has passed since they sent it (as a person at the palette: about one a second),
  starting at random moments of the first second; their latency.

Every answer is counted by its status: 200s are the searches done; 429 (a workspace past its
documented bound) and 5xx are reported apart and never counted as answers. Also measured over
each phase, from /proc: the CPU seconds of the server's own processes (the supervisor, its web
processes and its background process) and of the embedded Postgres's, each divided by the
searches answered, so a change that moves work between them shows.

With --replica, each value of --workers runs once more with a streaming replica of the
home's Postgres (db/standby.py: pg_basebackup of the running server, a second server on a
loopback port) named by SUBSPACE_REPLICA_URL; the replica's CPU per search is measured apart,
and the primary's shows what it was spared.

Uses the workspace bench/http_latency.py uses (SIZE chunks of SciFact, fake provider, built
first if --home lacks it), its query mix and its server (`subspace serve` on a free port of
127.0.0.1, stopped with SIGTERM), once per value of --workers. The load generator runs on
the same cores as the server, as on a small machine.

    python bench/many_clients.py --home /tmp/httpbench [--size 20000] [--workers 1 2]
        [--clients 1 30] [--paced 30] [--seconds 30] [--provider fake] [--replica] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS
from bench.hostile import free_port
from bench.http_latency import (
    LIMIT,
    ensure_loaded,
    labelled_queries,
    percentile,
    query_mix,
    running_server,
    workspace_name,
)
from bench.search_latency import existing_workspace, pick_queries
from subspace.config import Settings
from subspace.database import open_database
from subspace.db.embedded import start_embedded
from subspace.db.standby import Standby, start_standby
from subspace.keys import create_key

PACE_S = 1.0  # a paced searcher sends about one search a second
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def children() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        found.setdefault(parent, []).append(int(entry.name))
    return found


def tree(root: int) -> list[int]:
    """`root` and every process under it."""
    kids, pids, todo = children(), [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(kids.get(pid, []))
    return pids


def postmaster(pgdata: Path) -> int:
    """The postmaster of a Postgres data folder, from its pid file."""
    return int((pgdata / "postmaster.pid").read_text().split()[0])


class CpuMeter:
    """CPU seconds spent by the server's processes, by the primary Postgres's and by the
    replica's (when there is one) between start and stop."""

    def __init__(self, server_pid: int, home: Path, replica: Path | None) -> None:
        self.server_pid, self.home, self.replica = server_pid, home, replica

    def _read(self) -> tuple[float, float, float]:
        server = sum(cpu_seconds(pid) for pid in tree(self.server_pid))
        primary = Settings(home=self.home).pgdata
        database = sum(cpu_seconds(pid) for pid in tree(postmaster(primary)))
        replica = 0.0
        if self.replica is not None:
            replica = sum(cpu_seconds(pid) for pid in tree(postmaster(self.replica)))
        return server, database, replica

    def __enter__(self) -> CpuMeter:
        self._start = self._read()
        return self

    def __exit__(self, *_: object) -> None:
        end = self._read()
        self.server_s, self.database_s, self.replica_s = (
            e - s for e, s in zip(end, self._start, strict=True)
        )


def run_clients(
    base: str, headers: dict[str, str], mix: list[str], clients: int, seconds: float, paced: bool
) -> tuple[list[float], Counter[int], float]:
    """`clients` threads sending searches for `seconds`; the ms of each 200, the count of
    every status (0: no answer at all), and the wall time."""
    samples: list[list[float]] = [[] for _ in range(clients)]
    statuses: list[Counter[int]] = [Counter() for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def client(number: int) -> None:
        rng = random.Random(number)
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            start.wait()
            if paced:
                time.sleep(rng.random() * PACE_S)
            i = number
            while (sent := time.perf_counter()) < stop_at[0]:
                query = mix[i % len(mix)]
                i += 1
                try:
                    response = http.post(
                        "/api/search", json={"query": query, "mode": "hybrid", "limit": LIMIT}
                    )
                    response.read()
                    status = response.status_code
                except httpx.HTTPError:
                    status = 0
                took = time.perf_counter() - sent
                statuses[number][status] += 1
                if status == 200:
                    samples[number].append(took * 1000)
                if paced:
                    time.sleep(max(0.0, PACE_S - took))

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    stop_at[0] = time.perf_counter() + 10**6
    start.wait()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    return [ms for s in samples for ms in s], sum(statuses, Counter()), wall


def phase(
    server: Any, home: Path, headers: dict[str, str], mix: list[str], clients: int,
    seconds: float, paced: bool, replica: Path | None,
) -> dict[str, Any]:  # fmt: skip
    with CpuMeter(server.proc.pid, home, replica) as cpu:
        times, statuses, wall = run_clients(server.base, headers, mix, clients, seconds, paced)
    ordered = sorted(times)
    answered = len(ordered)
    return {
        "load": "paced" if paced else "closed loop",
        "clients": clients,
        "searches_per_s": round(answered / wall, 1),
        "p50_ms": percentile(ordered, 0.50) if ordered else None,
        "p95_ms": percentile(ordered, 0.95) if ordered else None,
        "p99_ms": percentile(ordered, 0.99) if ordered else None,
        "answered": answered,
        "429": statuses[429],
        "5xx": sum(n for code, n in statuses.items() if code >= 500),
        "other": sum(n for code, n in statuses.items() if code not in (200, 429) and code < 500),
        "server_cpu_ms_per_search": round(1000 * cpu.server_s / max(answered, 1), 2),
        "postgres_cpu_ms_per_search": round(1000 * cpu.database_s / max(answered, 1), 2),
        "replica_cpu_ms_per_search": round(1000 * cpu.replica_s / max(answered, 1), 2),
    }


def prepare(home: Path, size: int, corpus: Path, queries: int) -> tuple[dict[str, str], list[str]]:
    """An API key for the bench workspace, and the query mix (queries in order)."""
    ensure_loaded(home, size, corpus)
    settings = Settings(home=home, providers="fake", index_sweep_s=0)
    db = open_database(settings, pool_size=2)
    try:
        with db.pool.connection() as conn:
            actor = existing_workspace(conn, workspace_name(size))
        if actor is None:
            raise SystemExit(f"no workspace {workspace_name(size)!r} in {home}")
        cx = db.context(actor, settings)
        with cx.transaction() as conn:
            _, token = create_key(conn, actor, "many clients bench")
        mix = query_mix(labelled_queries(pick_queries(db, cx, queries, corpus)))
    finally:
        db.close()
    return {"authorization": f"Bearer {token}"}, [query for _, query in mix]


def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    headers, mix = prepare(home, args.size, args.corpus, args.queries)
    result: dict[str, Any] = {"size": args.size, "seconds": args.seconds, "runs": []}
    for workers in args.workers:
        for replicated in (False, True) if args.replica else (False,):
            env = {"SUBSPACE_WORKERS": str(workers), "PROVIDERS": args.provider}
            with replica_of(home, replicated) as standby:
                if standby is not None:
                    env["SUBSPACE_REPLICA_URL"] = standby.dsn
                with running_server(home, env) as server:
                    folder = None if standby is None else standby.folder
                    result["runs"] += measure(args, server, home, headers, mix, workers, folder)
    return result


def measure(
    args: argparse.Namespace, server: Any, home: Path, headers: dict[str, str], mix: list[str],
    workers: int, replica: Path | None,
) -> list[dict[str, Any]]:  # fmt: skip
    with httpx.Client(base_url=server.base, headers=headers, timeout=60) as http:
        for query in dict.fromkeys(mix):  # warm: every query's vector cached, plans made
            http.post("/api/search", json={"query": query, "limit": LIMIT})
    rows = []
    loads = [(c, False) for c in args.clients] + [(c, True) for c in args.paced]
    for clients, paced in loads:
        figures = phase(server, home, headers, mix, clients, args.seconds, paced, replica)
        rows.append({"workers": workers, "replica": replica is not None, **figures})
        print_row(rows[-1], file=sys.stderr)
    return rows


@contextmanager
def replica_of(home: Path, wanted: bool) -> Iterator[Standby | None]:
    """A streaming replica of the home's Postgres while the block runs (None unless
    `wanted`). The home's embedded server is started here, and the bench's server attaches
    to it."""
    if not wanted:
        yield None
        return
    primary = start_embedded(Settings(home=home).pgdata)
    folder = Path(tempfile.mkdtemp(prefix="many-clients-replica-")) / "replica"
    standby = start_standby(primary, folder, free_port())
    try:
        yield standby
    finally:
        standby.stop()
        primary.stop()
        shutil.rmtree(folder.parent, ignore_errors=True)


HEADER = (
    f"{'workers':>7} {'replica':>7} {'load':<11} {'clients':>7} {'search/s':>8} {'p50':>7} "
    f"{'p95':>7} {'p99':>7} {'429':>5} {'5xx':>4} {'cpu ms/search: server':>22} "
    f"{'postgres':>9} {'replica':>8}"
)


def print_row(row: dict[str, Any], file: Any = None) -> None:
    def ms(value: float | None) -> str:
        return f"{'-':>7}" if value is None else f"{value:7.1f}"

    print(
        f"{row['workers']:>7} {'yes' if row['replica'] else 'no':>7} {row['load']:<11} "
        f"{row['clients']:>7} {row['searches_per_s']:8.1f} {ms(row['p50_ms'])} "
        f"{ms(row['p95_ms'])} {ms(row['p99_ms'])} {row['429']:>5} {row['5xx']:>4} "
        f"{row['server_cpu_ms_per_search']:>22.2f} {row['postgres_cpu_ms_per_search']:>9.2f} "
        f"{row['replica_cpu_ms_per_search']:>8.2f}",
        file=file,
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", type=Path, help="keep the database here and reuse it")
    parser.add_argument("--size", type=int, default=20_000, help="chunks in the workspace")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="web processes")
    parser.add_argument("--clients", type=int, nargs="*", default=[1, 30], help="closed loop")
    parser.add_argument("--paced", type=int, nargs="*", default=[30], help="paced searchers")
    parser.add_argument("--seconds", type=float, default=30, help="length of each phase")
    parser.add_argument("--queries", type=int, default=100, help="queries per category")
    parser.add_argument("--provider", default="fake", help="PROVIDERS for the server")
    parser.add_argument("--replica", action="store_true", help="also with a streaming replica")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    print(HEADER, file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args, args.home or Path(tmp) / "home")
    if args.json:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
