"""Time to the first streamed answer bullet, and to the end of the answer, of /rag-direct
through a live `subspace serve` with the fake chat provider.

Uses the workspace bench/search_latency.py builds (SIZE chunks from SciFact in one knowledge
base, fake provider; built first if --home does not hold it), creates an API key for it,
starts `subspace serve` on a free port of 127.0.0.1 (bench/http_latency.py's Server), and asks
QUERIES SciFact claims one after another: POST /api/ask {question, strategy: "rag-direct"},
then reads GET /api/runs/{id}/events until `done`. A question's times are the client's wall
time from sending the POST to the first `bullet` event and to the `done` event (so they hold
the queueing, the worker's wake-up, the hybrid search, the fake chat's answer, the writes of
each bullet through add_node and the stream's poll). The questions are filed on the
workspace's "Questions" page, which grows by one bullet and its answers per question.

    python bench/ask_latency.py --home /tmp/bench10k [--size 10000] [--queries 50]
        [--corpus PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS
from bench.http_latency import ensure_loaded, percentile, running_server, workspace_name
from bench.search_latency import existing_workspace
from subspace.config import Settings
from subspace.database import open_database
from subspace.keys import create_key

STREAM_TIMEOUT_S = 60.0  # one answer; the fake chat answers in milliseconds


def claims(count: int, corpus: Path = DEFAULT_CORPUS) -> list[str]:
    """`count` claims of queries.jsonl beside `corpus` (SciFact's), the same ones on every
    run."""
    path = corpus.parent / "queries.jsonl"
    texts = [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    return random.Random(13).sample(texts, min(count, len(texts)))


def ask_once(client: httpx.Client, question: str) -> dict[str, Any]:
    """POST /api/ask, then follow the events; ms to the first bullet and to done."""
    started = time.perf_counter()
    asked = client.post("/api/ask", json={"question": question, "strategy": "rag-direct"})
    asked.raise_for_status()
    events_path = asked.json()["events"]
    first_ms: float | None = None
    bullets = 0
    with client.stream("GET", events_path, timeout=STREAM_TIMEOUT_S) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line == "event: bullet":
                bullets += 1
                if first_ms is None:
                    first_ms = (time.perf_counter() - started) * 1000
            elif line == "event: done":
                done_ms = (time.perf_counter() - started) * 1000
                break
        else:
            raise SystemExit(f"the stream of {events_path} ended without done")
    return {"first_bullet_ms": first_ms, "done_ms": done_ms, "bullets": bullets}


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": percentile(ordered, 0.50), "p95_ms": percentile(ordered, 0.95)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    home: Path = args.home
    ensure_loaded(home, args.size, args.corpus)
    settings = Settings(home=home, providers="fake", index_sweep_s=0)
    db = open_database(settings, pool_size=2)
    try:
        with db.pool.connection() as conn:
            actor = existing_workspace(conn, workspace_name(args.size))
            if actor is None:
                raise SystemExit(f"no workspace {workspace_name(args.size)!r} in {home}")
            _, token = create_key(conn, actor, "ask latency bench")
        questions = claims(args.queries, args.corpus)
        with running_server(home) as server:
            headers = {"authorization": f"Bearer {token}"}
            with httpx.Client(base_url=server.base, headers=headers, timeout=30) as client:
                ask_once(client, questions[0])  # untimed: the worker's first wake, warm caches
                timed = [ask_once(client, question) for question in questions]
    finally:
        db.close()
    firsts = [t["first_bullet_ms"] for t in timed if t["first_bullet_ms"] is not None]
    return {
        "size": args.size,
        "questions": len(timed),
        "answered": len(firsts),
        "bullets_per_answer": round(sum(t["bullets"] for t in timed) / len(timed), 2),
        "first_bullet": summary(firsts) if firsts else None,
        "done": summary([t["done_ms"] for t in timed]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="SciFact corpus.jsonl, or another in its layout (queries.jsonl beside it)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"/rag-direct, fake chat, {result['size']:,} chunks, {result['questions']} questions "
        f"({result['answered']} with a bullet, {result['bullets_per_answer']} bullets each)"
    )
    for name in ("first_bullet", "done"):
        figures = result[name]
        if figures:
            print(
                f"  to {name.replace('_', ' ')}: p50 {figures['p50_ms']} ms, "
                f"p95 {figures['p95_ms']} ms"
            )


if __name__ == "__main__":
    main()
