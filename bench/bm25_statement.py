"""The lexical leg's one statement alone (the exact BM25 top-k of every source), on a
database bench/search_latency.py built and kept with --home: what the search's other steps
(the query's analysis, the vector leg, fusion, the rows) add is left out.

The queries are search_latency's (rare words, the commonest word, SciFact claims, the claims
over memories only), each timed after one untimed run of it; with --common-words, also the
queries made of the N words in most documents, for each N given. A query is ranked as the
search ranks it: without its commonest words past SUBSPACE_MAX_QUERY_POSTINGS
(--max-query-postings; 0 for no limit).

    python bench/bm25_statement.py --home DIR [--size 100000] [--bases 1 10] [--queries 20]
        [--common-words 3 20 40 80] [--max-query-postings N]
"""

from __future__ import annotations

import argparse
import dataclasses
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
    settings (its statements planned for their own values), not prepared, and without the
    words the search would leave out."""
    conn.execute(SEARCH_SETTINGS)
    ws = cx.actor.workspace_id
    scope = resolve_scope(conn, ws, cx.actor.user_id, kb_ids=None,
                          tags=None, kinds=kinds, max_knowledge_bases=50)  # fmt: skip
    tsq = lexical.build_tsqueries(conn, parse_query(text), ws)
    sql = lexical.bm25_sql(conn, scope, tsq.within(cx.settings.max_query_postings), cap=CAP)
    started = time.perf_counter()
    conn.execute(sql.sql, sql.params, prepare=False).fetchall()
    return 1000 * (time.perf_counter() - started)


def commonest_words(conn: Conn, cx: Context, n: int) -> tuple[str, int]:
    """A query of the `n` words in most documents of the workspace (all sources together),
    and how many of them the search leaves out."""
    rows = conn.execute(
        "select lexeme from search.term_stats where workspace_id = %s and lexeme ~ '^[a-z]+$' "
        "group by lexeme order by sum(ndoc) desc, lexeme limit %s",
        (cx.actor.workspace_id, n),
    ).fetchall()
    text = " ".join(r["lexeme"] for r in rows)
    tsq = lexical.build_tsqueries(conn, parse_query(text), cx.actor.workspace_id)
    return text, len(tsq.within(cx.settings.max_query_postings).left_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="search_latency.py's --home")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--bases", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--queries", type=int, default=20, help="per query class")
    parser.add_argument(
        "--common-words", type=int, nargs="*", default=[], help="also time the N commonest words"
    )
    parser.add_argument("--max-query-postings", type=int, help="SUBSPACE_MAX_QUERY_POSTINGS")
    args = parser.parse_args()
    settings = Settings(home=args.home, providers="fake", index_sweep_s=0)
    if args.max_query_postings is not None:
        settings = dataclasses.replace(settings, max_query_postings=args.max_query_postings)
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
            for n in args.common_words:
                with db.pool.connection() as conn:
                    text, left_out = commonest_words(conn, cx, n)
                    times = [run(conn, cx, text, None) for _ in range(3)]
                    conn.rollback()
                label = f"the {n} commonest words ({left_out} left out)"
                print(f"  {label:45s} {' / '.join(f'{t:7.1f}' for t in times)} (three runs)",
                      flush=True)  # fmt: skip
    finally:
        db.close()


if __name__ == "__main__":
    main()
