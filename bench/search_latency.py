"""Search latency on a large workspace, with the fake provider, on an embedded Postgres.

Builds SIZE chunks from SciFact: sentences as bullets (node-sized chunks) and, for
FILE_SHARE of them, abstracts uploaded as text files and split into file-sized chunks. The
corpus is loaded once into one knowledge base and once spread over ten. Times lexical, vector
and hybrid search through the same `search()` the API uses; query vectors are embedded once
beforehand, so the figures exclude the query embedding.

    python bench/search_latency.py --size 100000 [--queries 100] [--clients 1 4]
        [--bases 1 10] [--file-share 0.2] [--home DIR] [--load-only] [--references]

With --home the database is kept there and reused by the next run with the same --home.
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
from subspace.db.pool import Conn
from subspace.indexer.chunking import split_text
from subspace.indexer.consumer import Indexer
from subspace.indexer.reindex import VECTOR_INDEX_SQL
from subspace.indexer.status import indexer_status
from subspace.ingest.outline import OutlineItem
from subspace.ingest.worker import extract_pending
from subspace.models import Actor
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


def documents(chunks: int) -> list[tuple[str, str]]:
    """(name, text) of abstracts as text files, enough for about `chunks` file chunks."""
    found: list[tuple[str, str]] = []
    total = 0
    for round_number in itertools.count():
        for number, (title, text) in enumerate(abstracts()):
            if total >= chunks:
                return found
            suffix = f" [{round_number}]" if round_number else ""
            body = f"{title}{suffix}\n\n{text}"
            found.append((f"abstract-{round_number}-{number}.txt", body))
            total += len(split_text(body))
    raise AssertionError


def load(db: Database, settings: Settings, cx: Context, texts: list[str],
         files: list[tuple[str, str]], kbs: int) -> float:  # fmt: skip
    kb_ids = [commands.create_knowledge_base(cx, f"Base {i}").id for i in range(kbs)]
    started = time.perf_counter()
    for number, (name, body) in enumerate(files):
        commands.upload_file(cx, name, body.encode(), content_type="text/plain",
                             kb_id=kb_ids[number % kbs])  # fmt: skip
    extract_pending(db, settings, workers=2)
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


def pick_queries(db: Database, cx: Context, count: int) -> dict[str, list[str]]:
    """Rare words, the word closest to 30% of chunks, and SciFact's claims as long questions.

    Word statistics come from Postgres itself, so stopwords and stemming match the index.
    """
    rng = random.Random(11)
    ws = cx.actor.workspace_id
    with db.pool.connection() as conn:
        size = scalar(
            conn,
            f"select (select count(*) from kb.nodes where workspace_id = '{ws}') "
            f"+ (select count(*) from search.file_chunks where workspace_id = '{ws}')",
        )
        stats = conn.execute(
            f"select word, ndoc from ts_stat($$select text_tsv from kb.nodes "
            f"where workspace_id = '{ws}' union all select text_tsv from search.file_chunks "
            f"where workspace_id = '{ws}'$$) order by ndoc desc, word"
        ).fetchall()
    common = min(stats, key=lambda r: abs(r["ndoc"] / size - 0.30))
    # The rarest words there are (a large corpus repeats every sentence, so its rarest words
    # are in a few documents per repetition).
    words = sorted((r["ndoc"], r["word"]) for r in stats if r["ndoc"] >= 2
                   and r["word"].isalpha() and len(r["word"]) > 6)  # fmt: skip
    rare = [word for _, word in words[: 5 * count]]
    claims = [json.loads(line)["text"] for line in
              (DEFAULT_CORPUS.parent / "queries.jsonl").open(encoding="utf-8")]  # fmt: skip
    label = f"common term ({common['word']!r}, {common['ndoc'] / size:.0%} of chunks)"
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
        embed_query(cx.search_runtime, provider, " ".join(query.split()), timeout_s=10)

    def one(query: str) -> float:
        started = time.perf_counter()
        search(cx, provider, SearchRequest(query=query, **options))
        return (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, queries))


def corpus_texts(db: Database, cx: Context) -> list[str]:
    """Every chunk's text as stored: bullets, then file chunks."""
    ws = cx.actor.workspace_id
    with db.pool.connection() as conn:
        rows = conn.execute(
            "select text from kb.nodes where workspace_id = %s union all "
            "select text from search.file_chunks where workspace_id = %s",
            (ws, ws),
        ).fetchall()
    return [r["text"] for r in rows]


def references(db: Database, cx: Context, queries: dict[str, list[str]]) -> None:
    """The systems a user might pick instead, on the same texts: the source document's
    literal SQL on our schema, bm25s with an exact in-memory scan of the same vectors, and
    LanceDB's hybrid search (its own BM25 index, an IVF-HNSW index, RRF)."""
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
        print(f"  {category:<48} {'seed SQL':<9} {percentiles(times)}")
    texts = corpus_texts(db, cx)
    provider = FakeProvider()
    vectors = provider.embed(texts)
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)  # fmt: skip
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
        print(f"  {category:<48} {'bm25s':<9} {percentiles(lexical_times)}")
        print(f"  {category:<48} {'bm25s+np':<9} {percentiles(hybrid_times)}")
    lancedb_reference(texts, vectors, queries)


def lancedb_reference(texts: list[str], vectors: Any, queries: dict[str, list[str]]) -> None:
    """LanceDB embedded, as its documentation sets up hybrid search: a native FTS index on
    the text, an approximate vector index with cosine distance, RRF of the two."""
    import lancedb
    import numpy as np
    import pyarrow as pa
    from lancedb.index import FTS, IvfHnswSq
    from lancedb.rerankers import RRFReranker

    provider = FakeProvider()
    with tempfile.TemporaryDirectory() as folder:
        db = lancedb.connect(folder)
        started = time.perf_counter()
        table = db.create_table("chunks", data=pa.table({
            "id": np.arange(len(texts)), "text": texts,
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.reshape(-1)), vectors.shape[1])}))  # fmt: skip
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        table.create_index("text", config=FTS())  # English stemming and stopwords
        fts = time.perf_counter() - started
        started = time.perf_counter()
        table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        print(
            f"  LanceDB: load {loaded:.1f} s, FTS index {fts:.1f} s, "
            f"IVF_HNSW_SQ index {time.perf_counter() - started:.1f} s"
        )
        reranker = RRFReranker()
        for category, items in queries.items():
            times: dict[str, list[float]] = {"lexical": [], "vector": [], "hybrid": []}
            for query in items:
                vector = provider.embed([query])[0]  # excluded, as for ours
                searches = {
                    "lexical": table.search(query, query_type="fts"),
                    "vector": table.search(vector, query_type="vector").distance_type("cosine"),
                    "hybrid": table.search(query_type="hybrid")
                    .vector(vector)
                    .text(query)
                    .rerank(reranker),
                }
                for mode, built in searches.items():
                    started = time.perf_counter()
                    built.limit(10).to_arrow()
                    times[mode].append((time.perf_counter() - started) * 1000)
            for mode, measured in times.items():
                print(f"  {category:<48} {'lance ' + mode[:3]:<9} {percentiles(measured)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000, help="chunks per knowledge-base set")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--bases", type=int, nargs="+", default=[1, 10])
    parser.add_argument(
        "--file-share", type=float, default=0.2, help="share of chunks that are file-sized"
    )
    parser.add_argument("--home", type=Path, help="keep the database here and reuse it")
    parser.add_argument("--load-only", action="store_true", help="build the corpus, time nothing")
    parser.add_argument(
        "--references",
        action="store_true",
        help="Also time the seed's SQL, bm25s + an exact numpy scan, and LanceDB ([bench]).",
    )
    args = parser.parse_args()
    file_chunks = round(args.size * args.file_share)
    texts = bullets(args.size - file_chunks)
    files = documents(file_chunks)
    provider = FakeProvider()
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp) / "home"
        settings = Settings(home=home, providers="fake", index_sweep_s=0)
        db = open_database(settings, pool_size=8)
        try:
            setups = []
            for kbs in args.bases:
                name = f"{kbs} bases, {args.size} chunks"
                with db.pool.connection() as conn:
                    actor = existing_workspace(conn, name) or create_workspace(conn, name)
                cx = db.context(actor, settings)
                setups.append((kbs, cx))
                if loaded(db, cx):
                    print(f"reusing {name!r} from {home}")
                    continue
                took = load(db, settings, cx, texts, files, kbs)
                print(
                    f"loaded {len(texts):,} bullets and {len(files):,} files into {kbs} "
                    f"knowledge base(s): {took:.1f} s = {args.size / took:,.0f} chunks/s "
                    "(GIN indexes live)"
                )
            with db.pool.connection() as conn:
                backlog = indexer_status(conn, provider.name, provider.model).backlog
            if backlog:
                with db.pool.connection() as conn:
                    conn.execute("drop index if exists search.embeddings_vec")
                started = time.perf_counter()
                Indexer(db, settings, provider).drain(timeout_s=24 * 3600)
                print(
                    f"embedded the chunks without the vector index: "
                    f"{time.perf_counter() - started:.1f} s"
                )
            with db.pool.connection() as conn:
                if not scalar(conn, "select to_regclass('search.embeddings_vec') is not null"):
                    started = time.perf_counter()
                    # The graph of a million 1,536-wide vectors needs ~4 GB to be built in
                    # memory; past maintenance_work_mem pgvector builds it far more slowly.
                    conn.execute("set maintenance_work_mem = '8GB'")
                    conn.execute(VECTOR_INDEX_SQL)
                    print(f"HNSW build: {time.perf_counter() - started:.1f} s")
                conn.execute("analyze")
                vectors = scalar(conn, "select count(*) from search.embeddings")
                size = scalar(conn, "select pg_size_pretty(pg_database_size(current_database()))")
                print(f"{vectors:,} vectors; database size: {size}")
            if args.load_only:
                return
            queries = pick_queries(db, setups[0][1], args.queries)
            if args.references:
                references(db, setups[0][1], queries)
            for _, cx in setups:
                # One untimed pass, as a running server would have had: the data and every
                # pooled connection's catalog caches are warm, as the in-memory engines are.
                for items in queries.values():
                    time_queries(cx, provider, items, 1, mode="hybrid")
            for clients in args.clients:
                for kbs, cx in setups:
                    print(f"\n{kbs} knowledge base(s), {clients} client(s), limit 10:")
                    for category, items in queries.items():
                        for mode in ("lexical", "vector", "hybrid"):
                            times = time_queries(cx, provider, items, clients, mode=mode)
                            print(f"  {category:<48} {mode:<9} {percentiles(times)}")
                    times = time_queries(cx, provider, queries["long question"], clients,
                                         mode="hybrid", kinds=["memory"])  # fmt: skip
                    print(
                        f"  {'long question, kind=memory (1%)':<48} {'hybrid':<9} "
                        f"{percentiles(times)}"
                    )
        finally:
            db.close()


def existing_workspace(conn: Conn, name: str) -> Actor | None:
    row = conn.execute(
        "select w.workspace_id, u.id from kb.workspaces w join kb.users u "
        "on u.workspace_id = w.workspace_id where w.name = %s",
        (name,),
    ).fetchone()
    return None if row is None else Actor(row["workspace_id"], row["id"])


def scalar(conn: Conn, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return next(iter(row.values()))


def loaded(db: Database, cx: Context) -> bool:
    with db.pool.connection() as conn:
        row = conn.execute(
            "select exists (select from kb.nodes where workspace_id = %s) as e",
            (cx.actor.workspace_id,),
        ).fetchone()
    return bool(row and row["e"])


if __name__ == "__main__":
    main()
