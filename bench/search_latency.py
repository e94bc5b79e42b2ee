"""Search latency on a large workspace, with the fake provider, on a fresh embedded Postgres.

Builds SIZE bullets from SciFact sentences twice: once in one knowledge base, once spread over
ten. Times lexical, vector and hybrid search through the same `search()` the API uses; query
vectors are embedded once beforehand, so the figures exclude the query embedding.

    python bench/search_latency.py --size 100000 [--queries 100] [--clients 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences
from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.indexer.consumer import Indexer
from subspace.indexer.reindex import VECTOR_INDEX_SQL
from subspace.ingest.outline import OutlineItem
from subspace.providers.fake import FakeProvider
from subspace.runtime import Database, open_database
from subspace.search.service import SearchRequest, search
from subspace.search.vector import embed_query
from subspace.workspaces import create_workspace

BULLETS_PER_PAGE = 100


def bullets(count: int) -> list[str]:
    found: list[str] = []
    for _, text in abstracts():
        found.extend(s[:200] for s in sentences(text))
    base = list(found)
    for round_number in itertools.count(1):
        if len(found) >= count:
            return found[:count]
        found.extend(f"{s} [{round_number}]" for s in base)
    raise AssertionError


def load(db: Database, settings: Settings, cx: Context, texts: list[str], kbs: int) -> float:
    kb_ids = [commands.create_knowledge_base(cx, f"Base {i}").id for i in range(kbs)]
    started = time.perf_counter()
    for page_number, start in enumerate(range(0, len(texts), BULLETS_PER_PAGE)):
        items = [OutlineItem(t) for t in texts[start : start + BULLETS_PER_PAGE]]
        page = commands.create_page_from_outline(
            cx, f"Notes {page_number}", items, kb_id=kb_ids[page_number % kbs]
        )
        # The first bullet of every page (one in a hundred) is a memory item.
        with cx.transaction() as conn:
            first = conn.execute(
                "select id from kb.nodes where workspace_id = %s and page_id = %s "
                "and parent_id is null and position = 0",
                (cx.actor.workspace_id, page.id),
            ).fetchone()
        assert first is not None
        commands.set_memory(cx, first["id"], True)
    return time.perf_counter() - started


def pick_queries(db: Database, cx: Context, size: int, count: int) -> dict[str, list[str]]:
    """Rare words, a word in about 30% of bullets, and SciFact's claims as long questions.

    Word statistics come from Postgres itself, so stopwords and stemming match the index.
    """
    rng = random.Random(11)
    with db.pool.connection() as conn:
        stats = conn.execute(
            "select word, ndoc from ts_stat($$select text_tsv from kb.nodes "
            f"where workspace_id = '{cx.actor.workspace_id}'$$) order by ndoc desc, word"
        ).fetchall()
    common = min(stats, key=lambda r: abs(r["ndoc"] / size - 0.30))
    rare = [r["word"] for r in stats if 2 <= r["ndoc"] <= 3 and r["word"].isalpha()
            and len(r["word"]) > 6]  # fmt: skip
    claims = [json.loads(line)["text"] for line in
              (DEFAULT_CORPUS.parent / "queries.jsonl").open(encoding="utf-8")]  # fmt: skip
    label = f"common term ({common['word']!r}, {common['ndoc'] / size:.0%} of bullets)"
    return {
        "rare term": rng.sample(rare, min(count, len(rare))),
        label: [common["word"]] * count,
        "long question": rng.sample(claims, min(count, len(claims))),
    }


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return f"p50 {at(0.5):6.1f}  p95 {at(0.95):6.1f}  p99 {at(0.99):6.1f} ms"


def time_queries(cx: Context, provider: FakeProvider, queries: list[str], clients: int,
                 **options: Any) -> list[float]:  # fmt: skip
    for query in queries:  # warm the query-vector cache: timings exclude the embedding
        embed_query(provider, " ".join(query.split()), timeout_s=10)

    def one(query: str) -> float:
        started = time.perf_counter()
        search(cx, provider, SearchRequest(query=query, **options))
        return (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, queries))


def references(db: Database, cx: Context, texts: list[str], queries: dict[str, list[str]],
               ) -> None:  # fmt: skip
    """The systems a user might pick instead, on the same texts: the source document's
    literal SQL on our schema, and bm25s with an exact in-memory scan of the same vectors."""
    import bm25s
    import numpy as np
    import Stemmer

    print("\nreference systems, 1 knowledge base, 1 client, limit 10:")
    for category, items in queries.items():
        times = []
        with db.pool.connection() as conn:
            for query in items:
                started = time.perf_counter()
                conn.execute(
                    "select n.id from kb.nodes n, websearch_to_tsquery('english', %s) q "
                    "where n.workspace_id = %s and n.text_tsv @@ q "
                    "order by ts_rank_cd(n.text_tsv, q) desc limit 10",
                    (query, cx.actor.workspace_id),
                ).fetchall()
                times.append((time.perf_counter() - started) * 1000)
        print(f"  {category:<48} {'seed SQL':<8} {percentiles(times)}")
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)  # fmt: skip
    vectors = FakeProvider().embed(texts)
    provider = FakeProvider()
    for category, items in queries.items():
        lexical_times, hybrid_times = [], []
        for query in items:
            started = time.perf_counter()
            tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
            ranked, _ = retriever.retrieve(tokens, k=100, show_progress=False)
            lexical_times.append((time.perf_counter() - started) * 1000)
            query_vector = provider.embed([query])[0]  # excluded, as for ours
            started_vector = time.perf_counter()
            scores = vectors @ query_vector
            nearest = np.argpartition(-scores, 100)[:100]
            nearest = nearest[np.argsort(-scores[nearest])]
            fused: dict[int, float] = {}
            for ranking in (ranked[0].tolist(), nearest.tolist()):
                for rank, doc in enumerate(ranking, start=1):
                    fused[doc] = fused.get(doc, 0.0) + 1 / (60 + rank)
            sorted(fused, key=lambda d: -fused[d])[:10]
            hybrid_times.append(lexical_times[-1] + (time.perf_counter() - started_vector) * 1000)
        print(f"  {category:<48} {'bm25s':<8} {percentiles(lexical_times)}")
        print(f"  {category:<48} {'bm25s+np':<8} {percentiles(hybrid_times)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument(
        "--references",
        action="store_true",
        help="Also time the seed's SQL and bm25s + an exact numpy scan.",
    )
    args = parser.parse_args()
    texts = bullets(args.size)
    provider = FakeProvider()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="fake", index_sweep_s=0)
        db = open_database(settings, pool_size=8)
        try:
            setups = []
            for kbs in (1, 10):
                with db.pool.connection() as conn:
                    actor = create_workspace(conn, f"{kbs} bases")
                cx = db.context(actor, settings)
                took = load(db, settings, cx, texts, kbs)
                print(
                    f"loaded {len(texts):,} bullets into {kbs} knowledge base(s): {took:.1f} s "
                    f"= {len(texts) / took:,.0f} bullets/s (GIN indexes live)"
                )
                setups.append((kbs, cx))
            with db.pool.connection() as conn:
                conn.execute("drop index search.embeddings_vec")
            started = time.perf_counter()
            Indexer(db, settings, provider).drain(timeout_s=7200)
            print(
                f"embedded {2 * len(texts):,} chunks without the vector index: "
                f"{time.perf_counter() - started:.1f} s"
            )
            started = time.perf_counter()
            with db.pool.connection() as conn:
                conn.execute(VECTOR_INDEX_SQL)
            print(
                f"HNSW build over {2 * len(texts):,} vectors: {time.perf_counter() - started:.1f} s"
            )
            with db.pool.connection() as conn:
                conn.execute("analyze")
                size = conn.execute("select pg_size_pretty(pg_database_size(current_database()))")
                print(f"database size: {size.fetchone()['pg_size_pretty']}")  # type: ignore[index]
            queries = pick_queries(db, setups[0][1], len(texts), args.queries)
            if args.references:
                references(db, setups[0][1], texts, queries)
            for clients in args.clients:
                for kbs, cx in setups:
                    print(f"\n{kbs} knowledge base(s), {clients} client(s), limit 10:")
                    for category, items in queries.items():
                        for mode in ("lexical", "vector", "hybrid"):
                            times = time_queries(cx, provider, items, clients, mode=mode)
                            print(f"  {category:<48} {mode:<8} {percentiles(times)}")
                    times = time_queries(cx, provider, queries["long question"], clients,
                                         mode="hybrid", kinds=["memory"])  # fmt: skip
                    print(
                        f"  {'long question, kind=memory (1%)':<48} {'hybrid':<8} "
                        f"{percentiles(times)}"
                    )
        finally:
            db.close()


if __name__ == "__main__":
    main()
