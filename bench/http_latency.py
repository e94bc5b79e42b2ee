"""HTTP end-to-end search latency against a running `subspace serve`, and its overhead over
calling `search()` in the same process.

Uses the workspace bench/search_latency.py builds (SIZE chunks from SciFact in one knowledge
base, fake provider; built first if --home does not hold it yet), creates an API key for it,
starts `subspace serve` on a free port of 127.0.0.1 against that home, waits for /readyz, and
stops it with SIGTERM at the end (also on an error or Ctrl-C).

The load generator is bounded: each of N clients holds one keep-alive connection and sends
WARMUP untimed requests, then REQUESTS timed ones back to back, over the query mix
search_latency uses (rare word, common word, long question, interleaved; client i starts
i positions into the mix). Endpoints: POST /api/search (mode hybrid, limit 10, the whole
workspace) and POST /api/v1/knowledge/search (searchMode hybrid, topK 10, the loaded
knowledge base). A request's time is the client's wall time from sending to the parsed body.

The direct figures call `search()` in this process with one client, the same queries in the
same order and the same options (for the Sim endpoint: the knowledge base; its route also
fetches each result's similarity and whole text, which the direct figure leaves out). They
include the query embedding as the server does it: through the query-vector cache, which
every distinct query of the mix has passed through once before timing in both paths (an
untimed pass), so a request pays a cache lookup, not a provider call. What a cache miss
would add is printed separately (the fake provider's `embed` of one query).

Between the two, "app, no socket" calls the same app in this process through Starlette's
TestClient, one client: routing, the key check, validation and serialisation, without uvicorn
or the network. Note that `subspace serve` opens its request pool with 2 connections (the
direct and in-process paths here get 4): past 2 concurrent searches requests queue for one.

    python bench/http_latency.py --home /tmp/bench100k [--size 100000] [--clients 1 8]
        [--requests 200] [--warmup 20] [--queries 100] [--corpus PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS
from bench.hostile import free_port
from bench.search_latency import Queries, existing_workspace, pick_queries
from subspace.api import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.database import open_database
from subspace.keys import create_key
from subspace.providers.fake import FakeProvider
from subspace.search.request import SearchRequest
from subspace.search.searcher import Searcher
from subspace.search.service import search

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 10  # results per search, as search_latency and Sim's default topK
# search_latency's query classes sent here: not its kind_filter, as neither endpoint takes a
# kind (the class would only repeat the questions).
QUERY_CLASSES = ("rare", "common", "question")
READY_WAIT_S = 180  # first start on a large home: Postgres recovery, migrations check
STOP_WAIT_S = 30  # the server's graceful stop is 10 s; Postgres stops after it


def workspace_name(size: int) -> str:
    """The name search_latency gives its single-base workspace of `size` chunks."""
    return f"1 bases, {size} chunks"


def ensure_loaded(home: Path, size: int, corpus: Path = DEFAULT_CORPUS) -> None:
    """Build the workspace with search_latency's own loader, from `corpus`, unless `home`
    already holds it; it also builds a missing vector index and analyzes."""
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "search_latency.py"),
            "--size",
            str(size),
            "--bases",
            "1",
            "--home",
            str(home),
            "--corpus",
            str(corpus),
            "--load-only",
        ],
        check=True,
        cwd=ROOT,
        stdout=sys.stderr,
    )


def labelled_queries(picked: Queries) -> dict[str, list[str]]:
    """The queries of each class sent, by the label search_latency prints for the class."""
    return {picked.labels[c]: picked.texts[c] for c in QUERY_CLASSES}


def query_mix(queries: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(category, query), the categories interleaved (rare, common, question, rare, ...), so
    that every window of the mix a client sends holds the three in the same proportion."""
    lists = list(queries.items())
    longest = max(len(items) for _, items in lists)
    return [(c, items[i]) for i in range(longest) for c, items in lists if i < len(items)]


def percentile(ordered: list[float], q: float) -> float:
    """Nearest rank of sorted `ordered`."""
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 2)


def stats(samples: list[tuple[str, float]], wall_s: float | None = None) -> dict[str, Any]:
    """p50/p95/p99 and mean of (category, ms) samples, the p50 of each category, and requests
    per second over `wall_s`."""
    ordered = sorted(ms for _, ms in samples)
    found: dict[str, Any] = {
        "n": len(ordered),
        "p50_ms": percentile(ordered, 0.50),
        "p95_ms": percentile(ordered, 0.95),
        "p99_ms": percentile(ordered, 0.99),
        "mean_ms": round(sum(ordered) / len(ordered), 2),
    }
    if wall_s is not None:
        found["req_per_s"] = round(len(ordered) / wall_s, 1)
    categories = dict.fromkeys(c for c, _ in samples)
    found["p50_ms_by_query"] = {
        c: percentile(sorted(ms for k, ms in samples if k == c), 0.50) for c in categories
    }
    return found


class Server:
    """`subspace serve` on 127.0.0.1:`port` against `home`, with the fake provider."""

    def __init__(self, home: Path, port: int, env: dict[str, str] | None = None) -> None:
        self.base = f"http://127.0.0.1:{port}"
        environment = {
            **os.environ,
            "SUBSPACE_HOME": str(home),
            "SUBSPACE_HOST": "127.0.0.1",
            "SUBSPACE_PORT": str(port),
            "PROVIDERS": "fake",
            "SUBSPACE_LOG_LEVEL": "warning",
            "SUBSPACE_INDEX_SWEEP_S": "0",
            **(env or {}),
        }
        self.log_path = home / "http-latency-server.log"
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "subspace", "serve", "--no-demo"],
            env=environment,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_WAIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited ({self.proc.returncode}); see {self.log_path}")
            try:
                if httpx.get(self.base + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"the server was not ready in {READY_WAIT_S} s; see {self.log_path}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not stopped in STOP_WAIT_S. Safe to call twice."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@contextmanager
def running_server(home: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    """The server of `Server`, ready, and stopped after the block; `env` adds to its
    environment (PROVIDERS, SUBSPACE_WORKERS, ...)."""
    server = Server(home, free_port(), env)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


# An endpoint: its path, the body for a query, and the number of results in a parsed answer
# (which raises when the answer is not a successful search).
Endpoint = tuple[str, Callable[[str], dict[str, Any]], Callable[[dict[str, Any]], int]]


def endpoints(kb_id: UUID) -> dict[str, Endpoint]:
    def api_count(body: dict[str, Any]) -> int:
        if body.get("degraded"):
            raise SystemExit(f"a degraded search: {body['degraded']}")
        return len(body["rows"])

    def sim_count(body: dict[str, Any]) -> int:
        if body.get("success") is not True:
            raise SystemExit(f"the Sim endpoint failed: {body}")
        return len(body["data"]["results"])

    return {
        "POST /api/search": (
            "/api/search",
            lambda q: {"query": q, "mode": "hybrid", "limit": LIMIT},
            api_count,
        ),
        "POST /api/v1/knowledge/search": (
            "/api/v1/knowledge/search",
            lambda q: {
                "knowledgeBaseIds": [str(kb_id)],
                "query": q,
                "searchMode": "hybrid",
                "topK": LIMIT,
            },
            sim_count,
        ),
    }


def send(client: httpx.Client | TestClient, endpoint: Endpoint, query: str) -> float:
    """One request; its wall time in ms. Fails loudly on anything but 200 with results."""
    path, body, count = endpoint
    started = time.perf_counter()
    response = client.post(path, json=body(query))
    parsed = response.json()
    took = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{path} answered {response.status_code} to {query!r}: {parsed}")
    if count(parsed) == 0:
        raise SystemExit(f"{path} found nothing for {query!r}")
    return took


def load(
    call: Callable[[int], Callable[[str], float]],
    mix: list[tuple[str, str]],
    clients: int,
    requests: int,
    warmup: int,
) -> dict[str, Any]:
    """`clients` threads, each sending `warmup` then `requests` queries back to back through
    its own `call(number)` (a keep-alive connection each); the timed parts start together.
    Client n sends the mix from position n on."""
    samples: list[list[tuple[str, float]]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    ready = threading.Barrier(clients + 1)
    done = threading.Barrier(clients + 1)

    def client(number: int) -> None:
        try:
            one = call(number)
            for i in range(warmup):
                one(mix[(number + i) % len(mix)][1])
            ready.wait()
            for i in range(warmup, warmup + requests):
                category, query = mix[(number + i) % len(mix)]
                samples[number].append((category, one(query)))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            ready.abort()
            done.abort()
            return
        done.wait()

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    try:
        ready.wait()
        started = time.perf_counter()
        done.wait()
        wall = time.perf_counter() - started
    except threading.BrokenBarrierError:
        for thread in threads:
            thread.join()
        raise SystemExit(f"a client failed: {errors[0]!r}") from errors[0]
    for thread in threads:
        thread.join()
    return stats([s for per_client in samples for s in per_client], wall)


def direct_call(
    cx: Context, searcher: Searcher, kb_ids: list[UUID] | None
) -> Callable[[str], float]:
    """`search()` in this process with the options the endpoint passes; its time in ms."""

    def one(query: str) -> float:
        started = time.perf_counter()
        found = search(
            cx, searcher, SearchRequest(query=query, kb_ids=kb_ids, mode="hybrid", limit=LIMIT)
        )
        took = (time.perf_counter() - started) * 1000
        if not found.rows or found.degraded:
            raise SystemExit(f"search() for {query!r}: {len(found.rows)} rows, {found.degraded}")
        return took

    return one


def time_embedding(provider: FakeProvider, mix: list[tuple[str, str]]) -> dict[str, Any]:
    """What a query-cache miss costs: the provider's embedding of one query."""
    samples = []
    for category, query in mix:
        started = time.perf_counter()
        provider.embed([query])
        samples.append((category, (time.perf_counter() - started) * 1000))
    return stats(samples)


def run(args: argparse.Namespace, home: Path) -> dict[str, Any]:
    ensure_loaded(home, args.size, args.corpus)
    settings = Settings(home=home, providers="fake", index_sweep_s=0)
    provider = FakeProvider()
    db = open_database(settings, pool_size=4)
    try:
        with db.pool.connection() as conn:
            actor = existing_workspace(conn, workspace_name(args.size))
            if actor is None:
                raise SystemExit(f"no workspace {workspace_name(args.size)!r} in {home}")
            row = conn.execute(
                "select k.id from kb.knowledge_bases k where k.workspace_id = %s "
                "and k.name = 'Base 0'",
                (actor.workspace_id,),
            ).fetchone()
            chunks = conn.execute(
                "select (select count(*) from kb.nodes where workspace_id = %(ws)s) "
                "+ (select count(*) from search.file_chunks where workspace_id = %(ws)s) as n",
                {"ws": actor.workspace_id},
            ).fetchone()
        assert row is not None and chunks is not None
        kb_id: UUID = row["id"]
        cx = db.context(actor, settings)
        with cx.transaction() as conn:
            _, token = create_key(conn, actor, "http latency bench")
        headers = {"authorization": f"Bearer {token}"}
        queries = labelled_queries(pick_queries(db, cx, args.queries, args.corpus))
        mix = query_mix(queries)
        distinct = list(dict.fromkeys(q for _, q in mix))

        result: dict[str, Any] = {
            "chunks": chunks["n"],
            "distinct_queries": {c: len(set(items)) for c, items in queries.items()},
            "clients": args.clients,
            "requests_per_client": args.requests,
            "warmup_per_client": args.warmup,
            "limit": LIMIT,
            "embedding_miss": time_embedding(provider, mix[: args.requests]),
            "endpoints": {},
        }
        targets = endpoints(kb_id)
        direct_kbs = {"POST /api/search": None, "POST /api/v1/knowledge/search": [kb_id]}
        # One untimed pass over every distinct query, as a running server would have had:
        # it fills the query-vector cache and warms the data and the plans.
        for kb_ids in direct_kbs.values():
            for query in distinct:
                direct_call(cx, db.searcher(provider), kb_ids)(query)
        for name, kb_ids in direct_kbs.items():
            result["endpoints"][name] = {
                "direct": load(
                    lambda _, k=kb_ids: direct_call(cx, db.searcher(provider), k),  # type: ignore[misc]
                    mix,
                    1,
                    args.requests,
                    args.warmup,
                )
            }
        # The app in this process, called through httpx without a socket: FastAPI, the key
        # check, validation and serialisation, but not uvicorn nor the network.
        with TestClient(create_app(settings, db), headers=headers) as asgi:
            for name, endpoint in targets.items():
                for query in distinct:
                    send(asgi, endpoint, query)
                result["endpoints"][name]["asgi"] = load(
                    lambda _, e=endpoint: partial(send, asgi, e),  # type: ignore[misc]
                    mix,
                    1,
                    args.requests,
                    args.warmup,
                )
        with running_server(home) as server:
            connections: list[httpx.Client] = []

            def connect(endpoint: Endpoint) -> Callable[[int], Callable[[str], float]]:
                def make(_: int) -> Callable[[str], float]:
                    http = httpx.Client(base_url=server.base, headers=headers, timeout=60)
                    connections.append(http)
                    return partial(send, http, endpoint)

                return make

            try:
                for endpoint in targets.values():
                    for query in distinct:
                        connect(endpoint)(0)(query)
                for name, endpoint in targets.items():
                    figures = result["endpoints"][name]
                    for clients in args.clients:
                        figures[f"http_{clients}"] = load(
                            connect(endpoint), mix, clients, args.requests, args.warmup
                        )
                    if 1 in args.clients:
                        figures["overhead_p50_ms"] = round(
                            figures["http_1"]["p50_ms"] - figures["direct"]["p50_ms"], 2
                        )
            finally:
                for http in connections:
                    http.close()
        return result
    finally:
        db.close()


PATHS = {"direct": "search()", "asgi": "app, no socket"}


def print_table(result: dict[str, Any]) -> None:
    print(
        f"\n{result['chunks']:,} chunks, limit {result['limit']}, "
        f"{result['requests_per_client']} timed requests per client after "
        f"{result['warmup_per_client']} warm-up; distinct queries: {result['distinct_queries']}"
    )
    categories = list(result["distinct_queries"])
    short = [c.split(" (")[0] for c in categories]
    print(
        f"{'endpoint':<30} {'path':<18} {'p50':>7} {'p95':>7} {'p99':>7} {'req/s':>7}   "
        + "  ".join(f"p50 {c}" for c in short)
    )
    for name, figures in result["endpoints"].items():
        for key, f in figures.items():
            if not isinstance(f, dict):
                continue
            path = PATHS[key] if key in PATHS else f"HTTP, {key.split('_')[1]} client(s)"
            rate = f"{f['req_per_s']:7.1f}"
            # Fewer timed requests than classes leave a class without a figure: shown as "-".
            by_query = "  ".join(
                f"{f['p50_ms_by_query'][c]:>{len(s) + 4}.1f}"
                if c in f["p50_ms_by_query"]
                else f"{'-':>{len(s) + 4}}"
                for c, s in zip(categories, short, strict=True)
            )
            print(
                f"{name:<30} {path:<18} {f['p50_ms']:7.1f} {f['p95_ms']:7.1f} "
                f"{f['p99_ms']:7.1f} {rate}   {by_query}"
            )
        if "overhead_p50_ms" in figures:
            print(
                f"{name:<30} overhead of HTTP, 1 client, over search() at p50: "
                f"{figures['overhead_p50_ms']:.1f} ms"
            )
    miss = result["embedding_miss"]
    print(
        f"(a query-cache miss would add the fake provider's embedding: p50 {miss['p50_ms']:.2f} "
        f"ms, p95 {miss['p95_ms']:.2f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--home", type=Path, help="keep the database here and reuse it")
    parser.add_argument("--size", type=int, default=100_000, help="chunks in the workspace")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--requests", type=int, default=200, help="timed requests per client")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests per client")
    parser.add_argument("--queries", type=int, default=100, help="queries per category")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="SciFact corpus.jsonl, or another in its layout (queries.jsonl beside it)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args, args.home or Path(tmp) / "home")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
