"""Load a collection into a fresh database, index it, and score every arm on it.

A collection is a BEIR-layout folder (`evaluation.beir`) or a judged workspace
(`evaluation.judged_workspace`); each has one loader, and every arm is scored the same way.
Reference arms run in the same process on the same texts.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import psycopg

from subspace.answers.answerer import create_chat_provider
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database, resolve_dsn
from subspace.db.migrate import migrate
from subspace.db.pool import open_pool
from subspace.db.vector_index import defer_vector_index
from subspace.errors import InvalidInput
from subspace.evaluation.answers import ANSWER_LABELS, ANSWER_METRICS, answer_all, shares
from subspace.evaluation.beir import Collection, add_typos, import_collection, load_collection
from subspace.evaluation.judged_workspace import (
    JudgedWorkspace,
    import_judged_workspace,
    is_judged_workspace,
    read_judged_workspace,
)
from subspace.evaluation.loaded import Loaded
from subspace.evaluation.metrics import evaluate, misses, rrf
from subspace.indexer.chunking import text_hash
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.reindex import VECTOR_INDEX_SQL
from subspace.providers.base import EmbeddingProvider, EmbedResult
from subspace.search import registry
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.options import RANKERS
from subspace.search.request import SearchRequest
from subspace.search.service import search

log = logging.getLogger(__name__)

FIRST_PAGE = 10  # the default limit: nDCG@10 and MRR@10 measure what it shows


class CachingProvider:
    """A provider that remembers vectors by (model, text hash) in a file, across runs."""

    def __init__(self, inner: EmbeddingProvider, folder: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.model = inner.model
        self.dimensions = inner.dimensions
        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in inner.model)
        self.path = folder / f"{slug}.npz"
        self.vectors: dict[str, np.ndarray[Any, Any]] = {}
        self.calls = 0
        if self.path.exists():
            stored = np.load(self.path)
            self.vectors = dict(zip(stored["keys"].tolist(), stored["vectors"], strict=True))

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        missing = [t for t in dict.fromkeys(texts) if text_hash(t) not in self.vectors]
        if missing:
            self.calls += 1
            fresh = np.asarray(self.inner.embed(missing), dtype=np.float32)
            for text, vector in zip(missing, fresh, strict=True):
                self.vectors[text_hash(text)] = vector
        return (
            np.stack([self.vectors[text_hash(t)] for t in texts])
            if texts
            else np.zeros((0, self.dimensions), dtype=np.float32)
        )

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.vectors))
        vectors = np.stack(list(self.vectors.values())) if self.vectors else np.zeros((0, 1))
        np.savez(self.path, keys=keys, vectors=vectors)


METRIC_LABELS = {
    "success@1": "success@1",
    "ndcg@10": "nDCG@10",
    "recall@100": "Recall@100",
    "mrr@10": "MRR@10",
    "not_empty": "not empty",  # of the queries with an answer
    "empty": "empty",  # of the queries judged to have none
}


@dataclass
class EvalReport:
    dataset: str
    provider: str
    model: str
    queries: int
    typos: bool
    metrics: tuple[str, ...]  # the columns, names from metrics.METRICS
    arms: dict[str, dict[str, float]] = field(default_factory=dict)
    # On a judged workspace, our arms' missed queries (metrics.misses), by arm.
    missed: dict[str, list[str]] = field(default_factory=dict)
    expect_empty: int = 0  # queries judged to have no answer
    # Queries over SUBSPACE_MAX_QUERY_CHARS, run with the limit raised to the longest.
    long_queries: int = 0
    max_query_chars: int = 0
    # Documents over SUBSPACE_MAX_NODE_CHARS, cut to it on import.
    cut_documents: int = 0
    max_node_chars: int = 0
    # Queries that are documents of the corpus (same id), their own document left out.
    own_documents: int = 0
    titled: bool = False  # titles as page titles, texts as bullets, both searched
    # The questions with a judged fact, answered by every strategy (evaluation.answers).
    chat: str = ""  # the chat model that wrote the answers, as provider/model
    questions: int = 0
    answers: dict[str, dict[str, float]] = field(default_factory=dict)  # strategy -> shares
    unanswered: dict[str, list[str]] = field(default_factory=dict)  # strategy -> query ids
    # that do not cite their fact

    def as_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "provider": self.provider, "model": self.model,
                "queries": self.queries, "expect_empty": self.expect_empty, "typos": self.typos,
                "metrics": list(self.metrics), "arms": self.arms, "missed": self.missed,
                "long_queries": self.long_queries, "cut_documents": self.cut_documents,
                "own_documents": self.own_documents, "titled": self.titled, "chat": self.chat,
                "questions": self.questions,
                "answers": self.answers, "unanswered": self.unanswered}  # fmt: skip

    def summary(self) -> str:
        """The provider and the queries, in one sentence."""
        return (
            f"Provider `{self.provider}` (model `{self.model}`), {self.queries} queries"
            + (
                f", {self.expect_empty} of them judged to have no answer"
                if self.expect_empty
                else ""
            )
            + (", with typos" if self.typos else "")
            + (", titles as page titles" if self.titled else "")
            + "."
        )

    def notes(self) -> list[str]:
        """What the run did differently from the collection's letter, one sentence each."""
        notes = []
        if self.long_queries:
            notes.append(
                f"{self.long_queries} of the queries are longer than SUBSPACE_MAX_QUERY_CHARS "
                f"({self.max_query_chars:,}); they ran with the limit raised to the longest."
            )
        if self.cut_documents:
            notes.append(
                f"{self.cut_documents} documents are longer than SUBSPACE_MAX_NODE_CHARS "
                f"({self.max_node_chars:,}); every arm read them cut to it."
            )
        if self.own_documents:
            notes.append(
                f"{self.own_documents} of the queries are documents of the corpus; as BEIR's "
                "evaluation does, each arm's ranking of such a query leaves its own document out."
            )
        return notes

    def markdown(self) -> str:
        lines = [
            f"# Retrieval quality on {self.dataset}",
            "",
            self.summary(),
            *(line for note in self.notes() for line in ("", note)),
            "",
            "| arm | " + " | ".join(METRIC_LABELS[m] for m in self.metrics) + " |",
            "|---" * (len(self.metrics) + 1) + "|",
        ]
        for arm, scores in self.arms.items():
            lines.append(
                f"| {arm} | " + " | ".join(f"{scores[m]:.3f}" for m in self.metrics) + " |"
            )
        lines += ["", *self.missed_lines()] if self.missed else []
        if self.answers:
            lines += ["", self.answers_summary(), "",
                      "| strategy | " + " | ".join(ANSWER_LABELS[m] for m in ANSWER_METRICS)
                      + " | not cited |", "|---" * (len(ANSWER_METRICS) + 2) + "|"]  # fmt: skip
            for name, scores in self.answers.items():
                lines.append(
                    f"| {name} | "
                    + " | ".join(f"{scores[m]:.3f}" for m in ANSWER_METRICS)
                    + f" | {', '.join(self.unanswered[name]) or '–'} |"
                )
        return "\n".join(lines) + "\n"

    def missed_lines(self) -> list[str]:
        """One sentence per arm naming the queries it missed."""
        return [
            f"Missed by {arm} (a wrong first row, or a row where none should be): "
            f"{', '.join(queries) or 'none'}."
            for arm, queries in self.missed.items()
        ]

    def answers_summary(self) -> str:
        return (
            f"Answers to the {self.questions} questions with a judged fact, written by "
            f"`{self.chat}`: the share that states the fact, and that cites a source stating it."
        )


def _fresh_database(settings: Settings) -> tuple[Database, Callable[[], None]]:
    """A new, migrated database on the configured server, dropped when done."""
    dsn, embedded = resolve_dsn(settings)
    name = f"subspace_eval_{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"drop database if exists {name} with (force)")
        conn.execute(f"create database {name}")
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params["dbname"] = name
    eval_dsn = psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]
    migrate(eval_dsn)
    db = Database(dsn=eval_dsn, pool=open_pool(eval_dsn, max_size=4), embedded=None)

    def drop() -> None:
        db.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"drop database if exists {name} with (force)")
        if embedded is not None:
            embedded.stop()

    return db, drop


EMBED_WAIT_MS = 600_000  # a query's embedding in an evaluation: as long as it takes
TITLE_WEIGHTS = (0.5, 0.75, 1.0, 1.5, 2.0)  # a page title's weights tried on a titled layout
SWEEP_WEIGHTS = (
    0.0,
    0.02,
    0.05,
    0.1,
    0.2,
    0.3,
    0.5,
    0.7,
    1.0,
    1.5,
)  # vector-leg weights tried by --sweep
SWEEP_FLOORS = (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)  # similarity floors tried by --sweep


def read_dataset(folder: Path) -> Collection | JudgedWorkspace:
    """The collection in `folder`: a judged workspace when it has judgments.jsonl, else BEIR."""
    if is_judged_workspace(folder):
        return read_judged_workspace(folder)
    if not (folder / "corpus.jsonl").is_file():
        raise InvalidInput(
            f"{folder} holds no collection: a BEIR collection has corpus.jsonl, queries.jsonl "
            "and qrels/test.tsv; a judged workspace has judgments.jsonl and a workspace/ folder."
        )
    return load_collection(folder)


def load(
    db: Database, cx: Context, dataset: Collection | JudgedWorkspace, titled: bool = False
) -> Loaded:
    """Put the collection into the database with its type's loader (titled: BEIR only)."""
    if isinstance(dataset, JudgedWorkspace):
        if titled:
            raise InvalidInput(
                "--titled lays out a BEIR collection; a judged workspace has its own."
            )
        return import_judged_workspace(db, cx, dataset)
    return import_collection(cx, dataset, titled)


@contextmanager
def loaded_database(
    settings: Settings,
    dataset: Collection | JudgedWorkspace,
    provider: CachingProvider,
    *,
    titled: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> Iterator[tuple[Database, Context, Loaded]]:
    """A fresh database holding `dataset`, embedded by `provider` and lexically indexed, with
    the context that owns it; dropped on leaving."""
    db, drop = _fresh_database(settings)
    try:
        cx = db.default_context(settings)
        progress(f"importing {dataset.name}")
        loaded = load(db, cx, dataset, titled)
        with db.pool.connection() as conn:
            # Build the vector index once after loading: faster than growing it row by row.
            defer_vector_index(conn, provider.model, provider.dimensions)
        progress("embedding")
        EmbeddingsFollower(db, settings, provider).drain(timeout_s=24 * 3600)
        with db.pool.connection() as conn:
            conn.execute(VECTOR_INDEX_SQL)
            conn.execute("analyze")
        provider.save()
        progress("building the lexical index")
        follower = LexicalFollower(db, settings)
        follower.run_once()
        follower.close()
        yield db, cx, loaded
    finally:
        drop()


def run_eval(
    settings: Settings,
    dataset: Collection | JudgedWorkspace,
    provider: CachingProvider,
    *,
    typos: bool = False,
    sweep: bool = False,
    titled: bool = False,
    progress: Callable[[str], None] = lambda _: None,
) -> EvalReport:
    """Every arm on `collection`. Titled, each document's title is its page's title and its
    text its bullet, and the search ranks titles and bullets together (a document is found
    by either), with the lexical arm also tried at each of TITLE_WEIGHTS."""
    with loaded_database(settings, dataset, provider, titled=titled, progress=progress) as held:
        db, cx, loaded = held
        queries = {qid: add_typos(text) if typos else text for qid, text in loaded.queries.items()}
        # A collection's queries are all run: the server's guards against hostile input are
        # not judgements on a benchmark. Queries over the query limit get it raised, and are
        # counted; a query's embedding is waited for however busy the machine is (a search
        # answering lexical-only on a timeout would make the figures depend on the load).
        longest = max((len(text) for text in queries.values()), default=0)
        long_queries = sum(len(text) > settings.max_query_chars for text in queries.values())
        cx = dataclasses.replace(
            cx,
            settings=dataclasses.replace(
                settings,
                max_query_chars=longest if long_queries else settings.max_query_chars,
                embed_timeout_ms=EMBED_WAIT_MS,
            ),
        )
        progress("running the queries")
        runs = _run_arms(db, cx, provider, loaded, queries, sweep=sweep, titled=titled,
                         progress=progress)  # fmt: skip
        own = {q for q in queries if q in loaded.own_documents}
        runs = {arm: {q: [t for t in ranked if t != q] if q in own else ranked
                      for q, ranked in run.items()} for arm, run in runs.items()}  # fmt: skip
        report = EvalReport(loaded.name, provider.name, provider.model, len(queries), typos,
                            loaded.metrics, expect_empty=len(loaded.expect_empty),
                            long_queries=long_queries, cut_documents=loaded.cut_documents,
                            max_node_chars=settings.max_node_chars,
                            max_query_chars=settings.max_query_chars,
                            own_documents=len(own), titled=titled)  # fmt: skip
        for arm, run in runs.items():
            report.arms[arm] = evaluate(run, loaded.qrels, loaded.metrics,
                                        expect_empty=loaded.expect_empty)  # fmt: skip
        if "success@1" in loaded.metrics:
            report.missed = {arm: misses(runs[arm], loaded.qrels,
                                         expect_empty=loaded.expect_empty)
                             for arm in ("lexical", "vector", "hybrid")}  # fmt: skip
        if loaded.facts:
            chat = create_chat_provider(cx.settings)
            graded = answer_all(cx, db.searcher(provider), chat,
                                {q: queries[q] for q in loaded.facts}, loaded.facts,
                                progress=progress)  # fmt: skip
            report.chat, report.questions = f"{chat.name}/{chat.model}", len(loaded.facts)
            for name, answers in graded.items():
                report.answers[name] = shares(answers)
                report.unanswered[name] = [q for q, g in answers.items() if not g.cites_fact]
        provider.save()
        return report


def _run_arms(
    db: Database,
    cx: Context,
    provider: CachingProvider,
    loaded: Loaded,
    queries: dict[str, str],
    *,
    sweep: bool,
    titled: bool = False,
    progress: Callable[[str], None],
) -> dict[str, dict[str, list[str]]]:
    """Each arm's ranked targets per query: ours in every mode, then the reference systems."""

    def ours(mode: str, **options: Any) -> dict[str, list[str]]:
        # The first ten are what a search with the default limit shows (its candidate
        # window is that of a person's query); the rest come from a search to the depth.
        found = {}
        searcher = db.searcher(provider)
        for qid, text in queries.items():
            ranked: list[str] = []
            for limit in sorted({FIRST_PAGE, loaded.depth}):
                response = search(cx, searcher, SearchRequest(
                    query=text, mode=mode, kinds=loaded.kinds, limit=limit, **options))  # fmt: skip
                ranked += [
                    loaded.target_of[r.id] for r in response.rows if r.id in loaded.target_of
                ]
            found[qid] = list(dict.fromkeys(ranked))[: loaded.depth]
        return found

    runs: dict[str, dict[str, list[str]]] = {}
    runs["lexical"] = ours("lexical", ranker=cx.settings.lexical_ranker)
    for ranker in RANKERS:
        if ranker != cx.settings.lexical_ranker:
            runs[f"lexical_{ranker}"] = ours("lexical", ranker=ranker)
    runs["vector"] = ours("vector")
    # The reference fusion takes the vector leg's whole list, as LanceDB's does: no floor.
    runs["vector_no_floor"] = ours("vector", min_similarity=-1)
    runs["hybrid"] = ours("hybrid")
    for weight in TITLE_WEIGHTS if titled else ():
        with registry.replaced(dataclasses.replace(registry.get("page"), weight=weight)):
            runs[f"lexical_title_weight_{weight:g}"] = ours("lexical")
    if sweep:
        for weight in SWEEP_WEIGHTS:
            runs[f"hybrid_vector_weight_{weight}"] = ours(
                "hybrid", weights={"lexical": 1.0, "vector": weight}
            )
        for floor in SWEEP_FLOORS:
            runs[f"hybrid_floor_{floor}"] = ours("hybrid", min_similarity=floor)
    if loaded.kinds == ["node"]:  # the seed's statement reads bullets only
        runs["seed_lexical"] = _seed_lexical(db, cx.actor.workspace_id, queries, loaded)
    runs["bm25s"] = _bm25s(loaded.texts, queries, loaded.depth)
    runs["rrf_bm25s_vector"] = {
        qid: rrf([runs["bm25s"][qid], runs["vector_no_floor"][qid]])[: loaded.depth]
        for qid in queries
    }
    if _has_lancedb():
        progress("running LanceDB's hybrid search")
        runs["lancedb_hybrid"] = _lancedb_hybrid(loaded.texts, queries, provider, loaded.depth)
    return runs


def _seed_lexical(
    db: Database, workspace_id: UUID, queries: dict[str, str], loaded: Loaded
) -> dict[str, list[str]]:
    """The source document's lexical leg, literally: every word required, ts_rank_cd."""
    found = {}
    with db.pool.connection() as conn:
        for qid, text in queries.items():
            rows = conn.execute(
                "select n.id from kb.nodes n, websearch_to_tsquery('english', %s) q "
                "where n.workspace_id = %s and n.text_tsv @@ q "
                "order by ts_rank_cd(n.text_tsv, q) desc, n.id limit %s",
                (text, workspace_id, loaded.depth),
            ).fetchall()
            found[qid] = [loaded.target_of[r["id"]] for r in rows if r["id"] in loaded.target_of]
    return found


def _bm25s(texts: dict[str, str], queries: dict[str, str], depth: int) -> dict[str, list[str]]:
    """BM25 by bm25s with the English stemmer and stopwords, over the same texts; a target
    with none of the query's words (score 0) is not a result."""
    try:
        import bm25s
        import Stemmer
    except ImportError as exc:
        raise RuntimeError(
            "The reference arms need the [eval] extra: pip install -e '.[eval]'."
        ) from exc
    ids = list(texts)
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(list(texts.values()), stopwords="en", stemmer=stemmer,
                                   show_progress=False), show_progress=False)  # fmt: skip
    qids = list(queries)
    tokens = bm25s.tokenize([queries[q] for q in qids], stopwords="en", stemmer=stemmer,
                            show_progress=False)  # fmt: skip
    results, scores = retriever.retrieve(tokens, k=min(depth, len(ids)), show_progress=False)
    return {
        qid: [ids[i] for i, score in zip(results[row], scores[row], strict=True) if score > 0]
        for row, qid in enumerate(qids)
    }


def _has_lancedb() -> bool:
    try:
        import lancedb  # noqa: F401
    except ImportError:
        return False
    return True


def _lancedb_hybrid(
    texts: dict[str, str], queries: dict[str, str], provider: EmbeddingProvider, depth: int
) -> dict[str, list[str]]:
    """LanceDB's hybrid search (the [bench] extra) over the same texts and vectors: its
    native BM25 index with English stemming and stopwords, an exact vector scan (what it
    does without a vector index), and its default RRF reranker."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS
    from lancedb.rerankers import RRFReranker

    ids = list(texts)
    vectors = np.asarray(provider.embed([texts[i] for i in ids]), dtype=np.float32)
    qids = list(queries)
    query_vectors = np.asarray(provider.embed([queries[q] for q in qids]), dtype=np.float32)
    with tempfile.TemporaryDirectory() as folder:
        table: Any = lancedb.connect(folder).create_table(
            "docs",
            data=pa.table({
                "doc": ids,
                "text": [texts[i] for i in ids],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.reshape(-1)), vectors.shape[1]),
            }),
        )  # fmt: skip
        # Positions, so a quoted phrase is a phrase query there too (without them LanceDB
        # refuses one: "position is not found but required for phrase queries").
        table.create_index(
            "text",
            config=FTS(language="English", stem=True, remove_stop_words=True, with_position=True),
        )
        reranker = RRFReranker()
        found = {}
        for qid, vector in zip(qids, query_vectors, strict=True):
            rows = (
                table.search(query_type="hybrid")
                .vector(vector)
                .text(queries[qid])
                .distance_type("cosine")
                .rerank(reranker)
                .limit(depth)
                .to_list()
            )
            found[qid] = [r["doc"] for r in rows]
        return found
