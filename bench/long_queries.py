"""A BEIR-layout collection of paragraph-long queries, made offline from SciFact's abstracts.

Construction (deterministic, seed 15): of the abstracts with at least MIN_SENTENCES sentences
(split as bench/corpus.py splits them), QUERIES are drawn at random. For each, 3 to 5 of its
sentences, drawn at random and kept in their order, become the query; the abstract stays in
the corpus under its id and title with only its other sentences, so no query is a verbatim
copy of what it should find, and it must be found by the vocabulary the two parts share. The
qrels judge that abstract relevant (score 1) and nothing else. Every other abstract is copied
unchanged. Such queries repeat their words (a paragraph on one topic names it several times),
which is what tells apart a BM25 that counts a repeated query word once from one that sums it
as bm25s and Lucene do.

    python bench/long_queries.py --out DIR [--queries 300] [--corpus PATH]

DIR then holds corpus.jsonl, queries.jsonl and qrels/test.tsv, which `subspace eval DIR` reads.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, sentences

QUERIES = 300  # as many as SciFact's judged test claims
MIN_SENTENCES = 7  # 3-5 for the query leaves the document at least 2 of its own
SEED = 15


def make_collection(corpus: Path, out: Path, count: int = QUERIES) -> int:
    """Write the collection into `out`; returns the number of queries written."""
    with corpus.open(encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle]
    rng = random.Random(SEED)
    eligible = [i for i, doc in enumerate(docs) if len(sentences(doc["text"])) >= MIN_SENTENCES]
    chosen = sorted(rng.sample(eligible, min(count, len(eligible))))
    queries = []
    for index in chosen:
        doc = docs[index]
        parts = sentences(doc["text"])
        taken = sorted(rng.sample(range(len(parts)), rng.randint(3, 5)))
        queries.append({"_id": f"lq-{doc['_id']}", "text": " ".join(parts[i] for i in taken)})
        kept = " ".join(p for i, p in enumerate(parts) if i not in taken)
        docs[index] = {**doc, "text": kept}
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for query in queries:
            handle.write(json.dumps(query, ensure_ascii=False) + "\n")
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        for query in queries:
            handle.write(f"{query['_id']}\t{query['_id'].removeprefix('lq-')}\t1\n")
    return len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write the collection to")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl")
    args = parser.parse_args()
    written = make_collection(args.corpus, args.out, args.queries)
    print(f"{written} queries over {args.corpus} written to {args.out}")


if __name__ == "__main__":
    main()
