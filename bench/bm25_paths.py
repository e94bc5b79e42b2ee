"""The exact BM25 top-k's two paths side by side: the lexical leg's one statement with
search.bm25_top_k pinned to the threshold algorithm, to the scan, and left to choose
(subspace.bm25_path), on a database bench/search_latency.py built and kept with --home.

The queries are search_latency's (rare words, the commonest word, SciFact claims, the claims
over memories only), each path timed on the same query in turn, after one untimed pass. Every
path must return the same rows: a difference is reported and fails the run.

    python bench/bm25_paths.py --home DIR [--size 100000] [--bases 1 10] [--queries 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.search_latency import FILTER_KIND, QUERY_CLASSES, existing_workspace, pick_queries
from subspace.config import Settings
from subspace.context import Context
from subspace.db.pool import Conn
from subspace.runtime import open_database
from subspace.search import lexical
from subspace.search.filters import resolve_scope
from subspace.search.query import parse_query

PATHS = ("threshold", "scan", "auto")
CAP = 100  # the leg's window at the default limit


def run(
    conn: Conn, cx: Context, text: str, kinds: list[str] | None, path: str
) -> tuple[float, Any]:
    """Milliseconds for the leg's statement on `path`, and its rows."""
    conn.execute("select set_config('subspace.bm25_path', %s, true)", (path,))
    scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                          tags=None, kinds=kinds, max_knowledge_bases=50)  # fmt: skip
    sql = lexical.bm25_sql(conn, scope, lexical.build_tsqueries(conn, parse_query(text)), cap=CAP)
    started = time.perf_counter()
    rows = conn.execute(sql.sql, sql.params).fetchall()
    took = 1000 * (time.perf_counter() - started)
    return took, [(r["kind"], r["target_id"], r["every"], round(r["score"], 9)) for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="search_latency.py's --home")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--bases", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--queries", type=int, default=20, help="per query class")
    args = parser.parse_args()
    settings = Settings(home=args.home, providers="fake", index_sweep_s=0)
    db = open_database(settings, pool_size=2)
    differ = 0
    try:
        for kbs in args.bases:
            name = f"{kbs} bases, {args.size} chunks"
            with db.pool.connection() as conn:
                actor = existing_workspace(conn, name)
            if actor is None:
                sys.exit(f"no workspace {name!r} in {args.home}: build it with search_latency.py")
            cx = db.context(actor, settings)
            queries = pick_queries(db, cx, args.queries)
            print(f"\n{name}: lexical statement, p50 / p95 ms")
            for query_class in QUERY_CLASSES:
                kinds = [FILTER_KIND] if query_class == "kind_filter" else None
                times: dict[str, list[float]] = {path: [] for path in PATHS}
                with db.pool.connection() as conn:
                    for text in queries.texts[query_class]:
                        for path in PATHS:
                            run(conn, cx, text, kinds, path)  # untimed: warm the caches
                        found = {}
                        for path in PATHS:
                            took, found[path] = run(conn, cx, text, kinds, path)
                            times[path].append(took)
                        if len({repr(rows) for rows in found.values()}) > 1:
                            differ += 1
                            print(f"  rows differ between paths for {text!r}")
                    conn.rollback()
                cells = "  ".join(
                    f"{path} {statistics.median(t):6.1f} / {statistics.quantiles(t, n=20)[-1]:6.1f}"
                    for path, t in times.items()
                )
                print(f"  {queries.labels[query_class]:45s} {cells}", flush=True)
    finally:
        db.close()
    if differ:
        sys.exit(f"{differ} queries returned different rows on different paths")


if __name__ == "__main__":
    main()
