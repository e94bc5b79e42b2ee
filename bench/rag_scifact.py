"""Citation quality of /rag-direct with the fake (extractive) chat provider on SciFact.

Imports the collection as `subspace eval` does (one page per abstract, its text in one
bullet), embeds it with the fake provider, then answers every judged query with the
rag-direct strategy and FakeChat, and reads the refs the answer cites back to documents:

- first_citation_relevant: share of queries whose answer's first citation is a document the
  qrels mark relevant (a query answered "I found nothing" counts as a miss);
- relevant_in_first_3: share with at least one relevant document among the first three
  documents cited;
- found: share of queries answered at all (the rest get "I found nothing" and closest hits);
- closest_*: the same two shares when the "Closest: …" hits of unanswered queries count as
  citations too.

    python bench/rag_scifact.py [--collection ../shared/datasets/scifact] [--limit N]
        [--home DIR]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace import commands
from subspace.answers.fake_chat import FakeChat
from subspace.answers.strategies import STRATEGIES
from subspace.answers.strategy import Answer, AnswerBullet, Job
from subspace.config import Settings
from subspace.db.vector_index import defer_vector_index
from subspace.evaluation.answers import Quiet
from subspace.evaluation.beir import load_collection, write_corpus
from subspace.evaluation.runner import _fresh_database
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.reindex import VECTOR_INDEX_SQL
from subspace.ingest.importer import import_path
from subspace.providers.fake import FakeProvider

DEFAULT_COLLECTION = Path(__file__).resolve().parents[2] / "shared/datasets/scifact"


def cited_docs(bullets: list[AnswerBullet], doc_of: dict[str, str]) -> list[str]:
    """The documents the bullets cite, in order of first citation."""
    docs: list[str] = []
    for bullet in bullets:
        for ref in bullet.refs:
            doc = doc_of.get(ref.split(":")[1]) if ":" in ref else None
            if doc is not None and doc not in docs:
                docs.append(doc)
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, default=DEFAULT_COLLECTION)
    parser.add_argument("--limit", type=int, default=0, help="only the first N queries")
    parser.add_argument("--home", type=Path, default=None, help="embedded Postgres folder")
    args = parser.parse_args()
    collection = load_collection(args.collection)
    home = args.home or Path(tempfile.mkdtemp(prefix="rag-scifact-"))
    settings = Settings(home=home, providers="fake", max_query_chars=10_000)
    provider = FakeProvider()
    db, drop = _fresh_database(settings)
    try:
        cx = db.default_context(settings)
        started = time.perf_counter()
        kb = commands.create_knowledge_base(cx, f"bench {collection.name}")
        with tempfile.TemporaryDirectory() as tmp:
            by_hash = write_corpus(collection, Path(tmp))
            import_path(cx, Path(tmp), kb_id=kb.id)
        with db.pool.connection() as conn:
            doc_of: dict[str, str] = {}
            for row in conn.execute(
                "select n.id as node_id, p.id as page_id, p.source_sha256 from kb.nodes n "
                "join kb.pages p on p.workspace_id = n.workspace_id and p.id = n.page_id"
            ):
                doc = by_hash[row["source_sha256"]]
                doc_of[str(row["node_id"])] = doc
                doc_of[str(row["page_id"])] = doc
            defer_vector_index(conn, provider.model, provider.dimensions)
        EmbeddingsFollower(db, settings, provider).drain(timeout_s=24 * 3600)
        with db.pool.connection() as conn:
            conn.execute(VECTOR_INDEX_SQL)
            conn.execute("analyze")
        load_s = time.perf_counter() - started
        queries = list(collection.queries.items())
        if args.limit:
            queries = queries[: args.limit]
        strategy = STRATEGIES["rag-direct"]
        chat = FakeChat()
        searcher = db.searcher(provider)
        first = top3 = found = closest_first = closest_top3 = 0
        started = time.perf_counter()
        for qid, text in queries:
            answer: Answer = strategy.answer(Job(cx, searcher, chat, text, settings, Quiet()))
            relevant = {d for d, score in collection.qrels[qid].items() if score > 0}
            docs = cited_docs(answer.bullets, doc_of) if answer.found else []
            everything = cited_docs(answer.bullets, doc_of)
            found += answer.found
            first += bool(docs) and docs[0] in relevant
            top3 += bool(relevant & set(docs[:3]))
            closest_first += bool(everything) and everything[0] in relevant
            closest_top3 += bool(relevant & set(everything[:3]))
        answer_s = time.perf_counter() - started
        count = len(queries)
        print(
            json.dumps(
                {
                    "collection": collection.name,
                    "strategy": "rag-direct",
                    "chat": f"{chat.name}/{chat.model}",
                    "embeddings": f"{provider.name}/{provider.model}",
                    "documents": len(collection.corpus),
                    "queries": count,
                    "first_citation_relevant": round(first / count, 3),
                    "relevant_in_first_3": round(top3 / count, 3),
                    "found": round(found / count, 3),
                    "closest_first_citation_relevant": round(closest_first / count, 3),
                    "closest_relevant_in_first_3": round(closest_top3 / count, 3),
                    "load_s": round(load_s, 1),
                    "answer_ms_mean": round(1000 * answer_s / count, 1),
                },
                indent=2,
            )
        )
    finally:
        drop()


if __name__ == "__main__":
    main()
