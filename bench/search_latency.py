"""Search latency on a large workspace, with the fake provider, on an embedded Postgres.

Builds SIZE chunks from SciFact: sentences as bullets (node-sized chunks) and, for
FILE_SHARE of them, abstracts uploaded as text files and split into file-sized chunks. The
corpus is loaded once into one knowledge base and once spread over ten. Times lexical, vector
and hybrid search through the same `search()` the API uses; query vectors are embedded once
beforehand, so the figures exclude the query embedding.

Query classes: rare (the rarest words of seven letters or more, in two or more chunks),
common (the most frequent word of the corpus), question (SciFact claims) and kind_filter
(the same claims, searching memory items only: one bullet in a hundred).

    python bench/search_latency.py --size 100000 [--queries 100] [--clients 1 4]
        [--bases 1 10] [--file-share 0.2] [--home DIR] [--corpus PATH] [--load-only]
        [--references] [--stages] [--beside-writes SECONDS] [--json]

Every system is timed in a process set up as a web process is (processes.py's
tune_collector: what the process holds is frozen out of the cyclic collector's walks, which
run less often).

With --references the reference systems are timed in the same run, on the same texts and
queries, in this process, with the same client counts (one knowledge base): the seed's SQL
(lexical only), bm25s (lexical; an exact numpy scan of the same vectors as its vector leg;
RRF of the two as its hybrid) and LanceDB (its FTS index, an IVF_HNSW_SQ index, its RRF).
With --beside-writes, one client searches the rare terms of one knowledge base (a pause of
50 ms after each) for SECONDS while another workspace adds a bullet and the lexical follower
commits it every 0.2 s: the searches' p50/p95/p99 (`beside_writes` in the JSON).

With --json one JSON object goes to stdout, {"size", "common_word", "filter_kind", "rows":
[{"system", "query", "mode", "bases", "clients", "p50_ms", "p95_ms", "p99_ms"}]}, and the
progress and text tables to stderr.

With --home the database is kept there and reused by the next run with the same --home.

After the load the lexical index is brought up to every write (built from the tables the
first time: its time and size are printed). With --stages, each hybrid search of one client
on one knowledge base is also timed step by step (`stages` in the JSON): the first round trip
(the query's analysis, the statistics and the scope), the lexical index's search, the second
(the vector leg and the delta), fusion, and hydration with the commit, each a median in ms.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences
from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database, open_database
from subspace.db.pool import Conn
from subspace.db.vector_index import build_vector_indexes, defer_vector_index
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.status import indexer_status
from subspace.ingest.outline import OutlineItem
from subspace.ingest.worker import extract_pending
from subspace.models import Actor
from subspace.processes import tune_collector
from subspace.providers.fake import FakeProvider
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.registry import is_memory
from subspace.search.request import SearchRequest
from subspace.search.searcher import Searcher
from subspace.search.service import search
from subspace.search.shared import SearchRuntime
from subspace.search.vector import embed_query
from subspace.splitting import split_text
from subspace.workspaces import create_workspace

BULLETS_PER_PAGE = 100


def bullets(count: int, corpus: Path = DEFAULT_CORPUS) -> list[str]:
    found: list[str] = []
    for _, text in abstracts(corpus):
        found.extend(s[:200] for s in sentences(text))
    base = list(found)
    for round_number in itertools.count(1):
        if len(found) >= count:
            return found[:count]
        found.extend(f"{s} [{round_number}]" for s in base)
    raise AssertionError


def documents(chunks: int, corpus: Path = DEFAULT_CORPUS) -> list[tuple[str, str]]:
    """(name, text) of abstracts as text files, enough for about `chunks` file chunks."""
    found: list[tuple[str, str]] = []
    total = 0
    for round_number in itertools.count():
        for number, (title, text) in enumerate(abstracts(corpus)):
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


QUERY_CLASSES = ("rare", "common", "question", "kind_filter")
MODES = ("lexical", "vector", "hybrid")
FILTER_KIND = "memory"  # one bullet in a hundred: the most selective kind of the corpus
DEPTH = 100  # each reference leg's list before fusion, as our legs' candidate lists


@dataclass
class Queries:
    """The timed queries of each class, and how the text output names each class."""

    texts: dict[str, list[str]]  # class -> queries; kind_filter runs the questions
    labels: dict[str, str]
    common_word: str


@dataclass
class Report:
    """Timings as rows of the JSON document; the text lines go to stdout, or to stderr as
    progress when the JSON document is stdout."""

    as_json: bool
    rows: list[dict[str, Any]] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(text, file=sys.stderr if self.as_json else sys.stdout, flush=True)

    def add(self, system: str, query: str, mode: str, bases: int, clients: int,
            times: list[float], label: str, column: str) -> None:  # fmt: skip
        p50, p95, p99 = quantiles(times)
        # `clients` calls are always in flight, so by Little's law the searches a second are
        # the clients over the mean time of one.
        per_s = clients * 1000 / (sum(times) / len(times))
        self.rows.append({"system": system, "query": query, "mode": mode, "bases": bases,
                          "clients": clients, "p50_ms": round(p50, 2), "p95_ms": round(p95, 2),
                          "p99_ms": round(p99, 2), "per_s": round(per_s, 1)})  # fmt: skip
        self.say(f"  {label:<48} {column:<9} p50 {p50:6.1f}  p95 {p95:6.1f}  p99 {p99:6.1f} ms"
                 f"  {per_s:6.1f}/s")  # fmt: skip


def pick_queries(db: Database, cx: Context, count: int, corpus: Path = DEFAULT_CORPUS) -> Queries:
    """Rare words, the most frequent word, and the claims of queries.jsonl beside `corpus`
    (SciFact's) as long questions.

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
    common = stats[0]
    # The rarest words there are (a large corpus repeats every sentence, so its rarest words
    # are in a few documents per repetition).
    words = sorted((r["ndoc"], r["word"]) for r in stats if r["ndoc"] >= 2
                   and r["word"].isalpha() and len(r["word"]) > 6)  # fmt: skip
    rare = [word for _, word in words[: 5 * count]]
    claims = [json.loads(line)["text"] for line in
              (corpus.parent / "queries.jsonl").open(encoding="utf-8")]  # fmt: skip
    questions = rng.sample(claims, min(count, len(claims)))
    return Queries(
        texts={
            "rare": rng.sample(rare, min(count, len(rare))),
            "common": [common["word"]] * count,
            "question": questions,
            "kind_filter": questions,
        },
        labels={
            "rare": "rare term",
            "common": f"common term ({common['word']!r}, {common['ndoc'] / size:.0%} of chunks)",
            "question": "long question",
            "kind_filter": f"long question, kind={FILTER_KIND} (1%)",
        },
        common_word=common["word"],
    )


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95 and p99 of `values`, each the nearest-rank element."""
    ordered = sorted(values)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return at(0.5), at(0.95), at(0.99)


def time_calls(call: Callable[[str], object], queries: list[str], clients: int) -> list[float]:
    """Milliseconds each call took, `clients` calls at a time."""

    def one(query: str) -> float:
        started = time.perf_counter()
        call(query)
        return (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, queries))


def time_queries(cx: Context, searcher: Searcher, queries: list[str], clients: int,
                 **options: Any) -> list[float]:  # fmt: skip
    assert searcher.provider is not None
    for query in queries:  # warm the query-vector cache: timings exclude the embedding
        embed_query(searcher.runtime, searcher.provider, " ".join(query.split()), timeout_s=10)
    return time_calls(
        lambda query: search(cx, searcher, SearchRequest(query=query, **options)),
        queries,
        clients,
    )


def ours(report: Report, db: Database, setups: list[tuple[int, Context]], queries: Queries,
         clients_list: list[int]) -> None:  # fmt: skip
    searcher = db.searcher(FakeProvider())
    for _, cx in setups:
        # One untimed pass, as a running server would have had: the data and every
        # pooled connection's catalog caches are warm, as the in-memory engines are.
        for query_class in QUERY_CLASSES:
            time_queries(cx, searcher, queries.texts[query_class], 1, mode="hybrid",
                         **filter_options(query_class))  # fmt: skip
    for clients in clients_list:
        for kbs, cx in setups:
            report.say(f"\n{kbs} knowledge base(s), {clients} client(s), limit 10:")
            for query_class in QUERY_CLASSES:
                for mode in MODES:
                    times = time_queries(cx, searcher, queries.texts[query_class], clients,
                                         mode=mode, **filter_options(query_class))  # fmt: skip
                    report.add("subspace", query_class, mode, kbs, clients, times,
                               queries.labels[query_class], mode)  # fmt: skip


class Stages:
    """Times the steps of each search while installed, one client at a time, by wrapping the
    functions `_search` calls in order (search/service.py) and the lexical index's search
    (search/lexical/leg.py): the first round trip is the time from the search's start to its
    scope; the legs', the time of run_legs without the index's search; what is left of the
    whole search after fusion is hydration and the commit."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self._saved: list[tuple[Any, str, Any]] = []
        self._started = 0.0
        self._engine = 0.0

    def __enter__(self) -> Stages:
        import importlib

        service = importlib.import_module("subspace.search.service")
        leg = importlib.import_module("subspace.search.lexical.leg")
        self._wrap(service, "_search", self._search)
        self._wrap(
            service, "resolve_request_scope", self._step("first round trip", since_start=True)
        )
        self._wrap(service, "run_legs", self._step("legs"))
        self._wrap(service, "fuse_legs", self._step("fusion"))
        self._wrap(leg, "_engine_rankings", self._step("lexical index"))
        return self

    def __exit__(self, *_: object) -> None:
        for module, function, real in reversed(self._saved):
            setattr(module, function, real)

    def _wrap(self, module: Any, function: str, make: Callable[[Any], Any]) -> None:
        real = getattr(module, function)
        self._saved.append((module, function, real))
        setattr(module, function, make(real))

    def _record(self, name: str, ms: float) -> None:
        self.times.setdefault(name, []).append(ms)

    def _search(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self._started = time.perf_counter()
            self._engine = 0.0
            found = real(*args, **kwargs)
            self._record("total", (time.perf_counter() - self._started) * 1000)
            return found

        return timed

    def _step(self, name: str, since_start: bool = False) -> Callable[[Any], Any]:
        def make(real: Callable[..., Any]) -> Callable[..., Any]:
            def timed(*args: Any, **kwargs: Any) -> Any:
                started = self._started if since_start else time.perf_counter()
                found = real(*args, **kwargs)
                ms = (time.perf_counter() - started) * 1000
                if name == "lexical index":
                    self._engine = ms
                elif name == "legs":
                    ms -= self._engine
                self._record(name, ms)
                return found

            return timed

        return make

    def medians(self) -> dict[str, float]:
        found = {name: sorted(t)[len(t) // 2] for name, t in self.times.items() if t}
        steps = ("first round trip", "lexical index", "legs", "fusion")
        found["hydration and commit"] = found["total"] - sum(found.get(s, 0.0) for s in steps)
        order = (*steps, "hydration and commit", "total")
        return {name: round(found[name], 2) for name in order if name in found}


def stage_breakdown(report: Report, db: Database, cx: Context, queries: Queries) -> dict[str, Any]:
    """The median time of each step of a hybrid search, per query class (one client), and
    what the server spends on each of its statements."""
    searcher = db.searcher(FakeProvider())
    found: dict[str, Any] = {}
    report.say("\nsteps of a hybrid search, 1 knowledge base, 1 client, median ms:")
    for query_class in QUERY_CLASSES:
        with Stages() as stages:
            time_queries(cx, searcher, queries.texts[query_class], 1, mode="hybrid",
                         **filter_options(query_class))  # fmt: skip
        medians = stages.medians()
        found[query_class] = medians
        report.say(f"  {queries.labels[query_class]:<48} " + ", ".join(
            f"{name} {value:.1f}" for name, value in medians.items()))  # fmt: skip
    report.say("\nthe server's share of a hybrid search, mean ms per search (EXPLAIN ANALYZE of "
               "each statement; prepared ones are not planned again):")  # fmt: skip
    for query_class in QUERY_CLASSES:
        costs = statement_costs(db, cx, searcher, queries.texts[query_class][:STATEMENT_QUERIES],
                                **filter_options(query_class))  # fmt: skip
        found[query_class]["server"] = costs
        report.say(f"  {queries.labels[query_class]}")
        for name, cost in costs.items():
            report.say(f"    {name:<28} planning {cost['planning']:5.2f}  "
                       f"execution {cost['execution']:5.2f}")  # fmt: skip
    return found


STATEMENT_QUERIES = 10  # searches whose statements are explained, per query class
STATEMENTS = {  # what a search's statements are, by how their text begins
    "select t, coalesce(v.l": "query terms and statistics",
    "select source, ndocs": "source sizes",
    "with nearest as": "vector leg: HNSW walk",
    "with candidates as": "vector leg: exact scan",
    "select kb.id as kb_id, (select count": "vector leg: base sizes",
    "select array_remove": "lexical delta: what changed",
    "select count(distinct": "lexical delta: how far behind",
    "select x.target_id from kb.exclusions": "exclusions",
    "with recursive up": "hydration: breadcrumbs",
}


def statement_name(sql: str) -> str | None:
    """What a search's statement is (STATEMENTS), or None for a setting or a savepoint."""
    name = next((n for head, n in STATEMENTS.items() if sql.startswith(head)), None)
    if name is None and sql.startswith("select ") and " as marked" in sql:
        return "hydration: " + sql.split(" from ", 1)[1].split()[0]  # the rows' table
    return name


def statement_costs(db: Database, cx: Context, searcher: Searcher, texts: list[str],
                    **options: Any) -> dict[str, dict[str, float]]:  # fmt: skip
    """The server's planning and execution time of each statement the searches of `texts`
    send, each explained on its own (EXPLAIN ANALYZE), as a mean per search."""
    import psycopg

    sent: list[tuple[str, Any]] = []
    real = psycopg.Connection.execute

    def spy(conn: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        sent.append((str(query), params))
        return real(conn, query, params, **kwargs)

    psycopg.Connection.execute = spy  # type: ignore[method-assign,assignment]
    try:
        for text in texts:
            search(cx, searcher, SearchRequest(query=text, mode="hybrid", **options))
    finally:
        psycopg.Connection.execute = real  # type: ignore[method-assign]
    totals: dict[str, dict[str, float]] = {}
    with db.pool.connection() as conn:
        conn.execute("begin")
        for sql, params in sent:
            if "set_config(" in sql:  # the walk's settings hold for what follows
                conn.execute(sql, params)
            name = statement_name(sql)
            if name is None:
                continue
            plan = conn.execute("explain (analyze, timing off, summary on) " + sql, params)
            lines = [row["QUERY PLAN"] for row in plan.fetchall()]
            cost = totals.setdefault(name, {"planning": 0.0, "execution": 0.0})
            for line in lines:
                for key in ("planning", "execution"):
                    if line.lower().startswith(f"{key} time:"):
                        cost[key] += float(line.split(":")[1].split()[0]) / len(texts)
        conn.execute("rollback")
    return {name: {k: round(v, 3) for k, v in cost.items()} for name, cost in totals.items()}


WRITE_EVERY_S = 0.2  # how often the busy neighbour of --beside-writes writes and commits
SEARCH_PAUSE_S = 0.05  # after each search of --beside-writes: a person typing, not a flood


def beside_writes(report: Report, db: Database, settings: Settings, cx: Context,
                  queries: Queries, seconds: float) -> dict[str, float]:  # fmt: skip
    """One client's searches while another workspace writes and the lexical follower
    commits its writes, each commit a new position for every reader of the index."""
    with db.pool.connection() as conn:
        actor = existing_workspace(conn, "Busy neighbour")
        actor = actor or create_workspace(conn, "Busy neighbour")
    neighbour = db.context(actor, settings)
    page = commands.create_page(neighbour, f"Writes of {time.time():.0f}")
    stop, commits = threading.Event(), itertools.count()

    def write() -> None:
        follower = LexicalFollower(db, settings)
        try:
            for n in itertools.count():
                commands.add_node(neighbour, page.id, f"note {n}")
                follower.run_once()
                next(commits)
                if stop.wait(WRITE_EVERY_S):
                    return
        finally:
            follower.close()

    searcher = db.searcher(FakeProvider())
    texts = queries.texts["rare"]
    time_queries(cx, searcher, texts, 1)  # warm, before the neighbour starts
    writer = threading.Thread(target=write)
    writer.start()
    times: list[float] = []
    started = time.perf_counter()
    try:
        for query in itertools.cycle(texts):
            if time.perf_counter() - started >= seconds:
                break
            sent = time.perf_counter()
            search(cx, searcher, SearchRequest(query=query))
            times.append((time.perf_counter() - sent) * 1000)
            time.sleep(SEARCH_PAUSE_S)
    finally:
        stop.set()
        writer.join()
    p50, p95, p99 = quantiles(times)
    made = next(commits)
    report.say(f"\nrare terms beside another workspace's writes ({made} commits in "
               f"{seconds:g} s): {len(times)} searches, p50 {p50:.1f}  p95 {p95:.1f}  "
               f"p99 {p99:.1f} ms")  # fmt: skip
    return {"searches": len(times), "commits": made, "p50_ms": round(p50, 2),
            "p95_ms": round(p95, 2), "p99_ms": round(p99, 2)}  # fmt: skip


def filter_options(query_class: str) -> dict[str, Any]:
    return {"kinds": [FILTER_KIND]} if query_class == "kind_filter" else {}


def corpus_texts(db: Database, cx: Context) -> tuple[list[str], list[str]]:
    """Every chunk's text as stored (bullets, then file chunks) and its kind: memory, node
    or file."""
    ws = cx.actor.workspace_id
    with db.pool.connection() as conn:
        rows = conn.execute(
            f"select text, case when coalesce({is_memory('n')}, false) then 'memory' "
            "else 'node' end as kind from kb.nodes n where workspace_id = %s union all "
            "select text, 'file' from search.file_chunks where workspace_id = %s",
            (ws, ws),
        ).fetchall()
    return [r["text"] for r in rows], [r["kind"] for r in rows]


def references(report: Report, db: Database, cx: Context, queries: Queries,
               clients_list: list[int]) -> None:  # fmt: skip
    """The systems a user might pick instead, on the same texts: the source document's
    literal SQL on our schema, bm25s with an exact in-memory scan of the same vectors, and
    LanceDB's hybrid search (its own BM25 index, an IVF-HNSW index, RRF). Each is timed in
    this process after one untimed pass, with the query vectors embedded beforehand as
    ours are; the kind filter is a where clause on a kind column for LanceDB and the seed's
    SQL, a document mask for bm25s and the numpy scan."""
    import bm25s
    import numpy as np
    import Stemmer

    texts, kinds = corpus_texts(db, cx)
    provider = FakeProvider()
    vectors = provider.embed(texts)
    in_kind = np.array([kind == FILTER_KIND for kind in kinds])
    query_vectors = {q: provider.embed([q])[0] for items in queries.texts.values() for q in items}

    def seed_sql(query_class: str) -> Callable[[str], object]:
        only = f"and {is_memory('n')} " if query_class == "kind_filter" else ""

        def run(query: str) -> object:
            with db.pool.connection() as conn:
                return conn.execute(
                    "select n.id from kb.nodes n, websearch_to_tsquery('english', %s) q "
                    f"where n.workspace_id = %s and n.text_tsv @@ q {only}"
                    "order by ts_rank_cd(n.text_tsv, q) desc limit 10",
                    (query, cx.actor.workspace_id),
                ).fetchall()

        return run

    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                    show_progress=False)  # fmt: skip

    def bm25s_leg(query: str, mask: Any) -> list[int]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, show_progress=False)
        ranked, scores = retriever.retrieve(tokens, k=DEPTH, show_progress=False,
                                            weight_mask=mask)  # fmt: skip
        return list(ranked[0][scores[0] > 0].tolist())  # a document without the words is no hit

    def numpy_leg(query: str, mask: Any) -> list[int]:
        scores = vectors @ query_vectors[query]
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        nearest = np.argpartition(-scores, DEPTH)[:DEPTH]
        nearest = nearest[np.argsort(-scores[nearest])]
        return list(nearest[np.isfinite(scores[nearest])].tolist())  # masked out: no hit

    def bm25s_mode(mode: str, query_class: str) -> Callable[[str], object]:
        mask = in_kind.astype(np.float32) if query_class == "kind_filter" else None

        def run(query: str) -> object:
            lists = []
            if mode != "vector":
                lists.append(bm25s_leg(query, mask))
            if mode != "lexical":
                lists.append(numpy_leg(query, None if mask is None else in_kind))
            fused: dict[int, float] = {}
            for ranking in lists:
                for rank, doc in enumerate(ranking, start=1):
                    fused[doc] = fused.get(doc, 0.0) + 1 / (60 + rank)
            return sorted(fused, key=lambda d: -fused[d])[:10]

        return run

    calls: dict[tuple[str, str, str], Callable[[str], object]] = {}
    for query_class in QUERY_CLASSES:
        calls["seed_sql", query_class, "lexical"] = seed_sql(query_class)
        for mode in MODES:
            calls["bm25s", query_class, mode] = bm25s_mode(mode, query_class)
    columns = {("seed_sql", "lexical"): "seed SQL", ("bm25s", "lexical"): "bm25s",
               ("bm25s", "vector"): "numpy", ("bm25s", "hybrid"): "bm25s+np"}  # fmt: skip
    time_references(report, queries, clients_list, calls, columns)
    lancedb_reference(report, texts, kinds, vectors, query_vectors, queries, clients_list)


def time_references(report: Report, queries: Queries, clients_list: list[int],
                    calls: dict[tuple[str, str, str], Callable[[str], object]],
                    columns: dict[tuple[str, str], str]) -> None:  # fmt: skip
    for (_, query_class, _), call in calls.items():  # the untimed pass
        time_calls(call, queries.texts[query_class], 1)
    for clients in clients_list:
        report.say(f"\nreference systems, 1 knowledge base, {clients} client(s), limit 10:")
        for (system, query_class, mode), call in calls.items():
            times = time_calls(call, queries.texts[query_class], clients)
            report.add(system, query_class, mode, 1, clients, times,
                       queries.labels[query_class], columns[system, mode])  # fmt: skip


def lancedb_reference(report: Report, texts: list[str], kinds: list[str], vectors: Any,
                      query_vectors: dict[str, Any], queries: Queries,
                      clients_list: list[int]) -> None:  # fmt: skip
    """LanceDB embedded, as its documentation sets up hybrid search: a native FTS index on
    the text, an approximate vector index with cosine distance, RRF of the two; the kind
    filter is a where clause on a kind column, applied before the search."""
    import lancedb
    import numpy as np
    import pyarrow as pa
    from lancedb.index import FTS, IvfHnswSq
    from lancedb.rerankers import RRFReranker

    with tempfile.TemporaryDirectory() as folder:
        db: Any = lancedb.connect(folder)
        started = time.perf_counter()
        table = db.create_table("chunks", data=pa.table({
            "id": np.arange(len(texts)), "text": texts, "kind": kinds,
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(vectors.reshape(-1)), vectors.shape[1])}))  # fmt: skip
        loaded = time.perf_counter() - started
        started = time.perf_counter()
        table.create_index("text", config=FTS())  # English stemming and stopwords
        fts = time.perf_counter() - started
        started = time.perf_counter()
        table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        report.say(
            f"  LanceDB: load {loaded:.1f} s, FTS index {fts:.1f} s, "
            f"IVF_HNSW_SQ index {time.perf_counter() - started:.1f} s"
        )
        reranker = RRFReranker()

        def lance(mode: str, query_class: str) -> Callable[[str], object]:
            def run(query: str) -> object:
                vector = query_vectors[query]
                built: Any = {
                    "lexical": lambda: table.search(query, query_type="fts"),
                    "vector": lambda: table.search(vector, query_type="vector").distance_type(
                        "cosine"
                    ),
                    "hybrid": lambda: (
                        table.search(query_type="hybrid")
                        .vector(vector)
                        .text(query)
                        .rerank(reranker)
                    ),
                }[mode]()
                if query_class == "kind_filter":
                    built = built.where(f"kind = '{FILTER_KIND}'", prefilter=True)
                return built.limit(10).to_arrow()

            return run

        calls = {("lancedb", query_class, mode): lance(mode, query_class)
                 for query_class in QUERY_CLASSES for mode in MODES}  # fmt: skip
        columns = {("lancedb", mode): "lance " + mode[:3] for mode in MODES}
        time_references(report, queries, clients_list, calls, columns)


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
    parser.add_argument(
        "--corpus",
        type=Path,
        default=DEFAULT_CORPUS,
        help="SciFact corpus.jsonl, or another in its layout (queries.jsonl beside it)",
    )
    parser.add_argument("--load-only", action="store_true", help="build the corpus, time nothing")
    parser.add_argument(
        "--references",
        action="store_true",
        help="Also time the seed's SQL, bm25s + an exact numpy scan, and LanceDB ([bench]).",
    )
    parser.add_argument(
        "--stages", action="store_true", help="Also time each step of a hybrid search."
    )
    parser.add_argument(
        "--beside-writes",
        type=float,
        metavar="SECONDS",
        help="Also time searches while another workspace writes and the follower commits.",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="Print one JSON object {size, rows: [{system, query, mode, bases, clients, "
        "p50_ms, p95_ms, p99_ms, per_s}]} on stdout; progress goes to stderr.",
    )
    args = parser.parse_args()
    report = Report(as_json=args.json)
    file_chunks = round(args.size * args.file_share)
    texts = bullets(args.size - file_chunks, args.corpus)
    files = documents(file_chunks, args.corpus)
    provider = FakeProvider()
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp) / "home"
        settings = Settings(home=home, providers="fake", index_sweep_s=0)
        db = open_database(settings, pool_size=8)
        # A workspace's share of concurrent searches defaults to the cores; the clients of a
        # throughput run are one workspace's on purpose.
        db.search_runtime.close()
        db.search_runtime = SearchRuntime(searches_per_workspace=max(args.clients))
        try:
            setups = []
            for kbs in args.bases:
                name = f"{kbs} bases, {args.size} chunks"
                with db.pool.connection() as conn:
                    actor = existing_workspace(conn, name) or create_workspace(conn, name)
                cx = db.context(actor, settings)
                setups.append((kbs, cx))
                if loaded(db, cx):
                    report.say(f"reusing {name!r} from {home}")
                    continue
                took = load(db, settings, cx, texts, files, kbs)
                report.say(
                    f"loaded {len(texts):,} bullets and {len(files):,} files into {kbs} "
                    f"knowledge base(s): {took:.1f} s = {args.size / took:,.0f} chunks/s "
                    "(GIN indexes live)"
                )
            with db.pool.connection() as conn:
                backlog = indexer_status(conn, provider.name, provider.model).backlog
            if backlog:
                with db.pool.connection() as conn:
                    defer_vector_index(conn, provider.model, provider.dimensions)
                started = time.perf_counter()
                EmbeddingsFollower(db, settings, provider).drain(timeout_s=24 * 3600)
                report.say(
                    f"embedded the chunks without the vector index: "
                    f"{time.perf_counter() - started:.1f} s"
                )
            with db.pool.connection() as conn:
                started = time.perf_counter()
                # The graph of a million vectors needs GBs to be built in memory; past
                # maintenance_work_mem pgvector builds it far more slowly.
                conn.execute("set maintenance_work_mem = '8GB'")
                if build_vector_indexes(conn):
                    report.say(f"HNSW build: {time.perf_counter() - started:.1f} s")
                conn.execute("analyze")
                vectors = scalar(conn, "select count(*) from search.embeddings")
                size = scalar(conn, "select pg_size_pretty(pg_database_size(current_database()))")
                report.say(f"{vectors:,} vectors; database size: {size}")
            follower = LexicalFollower(db, settings)
            started = time.perf_counter()
            followed = follower.run_once()
            follower.close()
            on_disk = sum(f.stat().st_size for f in follower.folder.rglob("*") if f.is_file())
            report.say(
                f"lexical index {'built' if followed.rebuilt else 'brought up to date'}: "
                f"{time.perf_counter() - started:.1f} s, {on_disk / 2**20:,.0f} MB on disk"
            )
            if args.load_only:
                return
            queries = pick_queries(db, setups[0][1], args.queries, args.corpus)
            if args.references:
                tune_collector()
                references(report, db, setups[0][1], queries, args.clients)
            # As a web process does once the app is built (processes.py): without it, a full
            # collection walked every object the load and the references left (147,000),
            # pausing whichever search was running for ~100 ms (p99 112-135 ms at 4 clients).
            tune_collector()
            ours(report, db, setups, queries, args.clients)
            stages = stage_breakdown(report, db, setups[0][1], queries) if args.stages else {}
            busy: dict[str, float] = {}
            if args.beside_writes:
                busy = beside_writes(report, db, settings, setups[0][1], queries,
                                     args.beside_writes)  # fmt: skip
        finally:
            db.close()
    if args.json:
        print(json.dumps({"size": args.size, "common_word": queries.common_word,
                          "filter_kind": FILTER_KIND, "rows": report.rows,
                          "stages": stages, "beside_writes": busy}))  # fmt: skip


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
