"""The lexical leg's one statement alone (the exact BM25 top-k of every source), on a
database bench/search_latency.py built and kept with --home: what the search's other steps
(the query's analysis, the vector leg, fusion, the rows) add is left out.

The queries are search_latency's (rare words, the commonest word, SciFact claims, the claims
over memories only), each timed after one untimed run of it.

    python bench/bm25_statement.py --home DIR [--size 100000] [--bases 1 10] [--queries 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.search_latency import FILTER_KIND, QUERY_CLASSES, existing_workspace, pick_queries
from subspace.config import Settings
from subspace.context import Context
from subspace.db.pool import Conn
from subspace.runtime import open_database
from subspace.search import lexical
from subspace.search.filters import resolve_scope
from subspace.search.legs import SEARCH_SETTINGS
from subspace.search.query import parse_query

CAP = 100  # the leg's window at the default limit


def run(conn: Conn, cx: Context, text: str, kinds: list[str] | None) -> float:
    """Milliseconds for the leg's statement, run as a search runs it: with the search's
    settings (its statements planned for their own values) and not prepared."""
    conn.execute(SEARCH_SETTINGS)
    scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                          tags=None, kinds=kinds, max_knowledge_bases=50)  # fmt: skip
    sql = lexical.bm25_sql(conn, scope, lexical.build_tsqueries(conn, parse_query(text)), cap=CAP)
    started = time.perf_counter()
    conn.execute(sql.sql, sql.params, prepare=False).fetchall()
    return 1000 * (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="search_latency.py's --home")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--bases", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--queries", type=int, default=20, help="per query class")
    args = parser.parse_args()
    settings = Settings(home=args.home, providers="fake", index_sweep_s=0)
    db = open_database(settings, pool_size=2)
    try:
        for kbs in args.bases:
            name = f"{kbs} bases, {args.size} chunks"
            with db.pool.connection() as conn:
                actor = existing_workspace(conn, name)
            if actor is None:
                sys.exit(f"no workspace {name!r} in {args.home}: build it with search_latency.py")
            cx = db.context(actor, settings)
            queries = pick_queries(db, cx, args.queries)
            print(f"\n{name}: lexical statement, p50 / p95 / max ms")
            for query_class in QUERY_CLASSES:
                kinds = [FILTER_KIND] if query_class == "kind_filter" else None
                times = []
                with db.pool.connection() as conn:
                    for text in queries.texts[query_class]:
                        run(conn, cx, text, kinds)  # untimed: warm the caches
                        times.append(run(conn, cx, text, kinds))
                    conn.rollback()
                p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[-1]
                print(f"  {queries.labels[query_class]:45s} {p50:7.1f} / {p95:7.1f} / "
                      f"{max(times):7.1f}", flush=True)  # fmt: skip
    finally:
        db.close()


if __name__ == "__main__":
    main()
