"""bm25s on a BEIR collection, with and without repeated query words, on its tokens and ours.

The arms run over the texts `subspace eval` indexes (each document's title, a full stop, its
text) and score as `subspace eval` does (nDCG@10, Recall@100, MRR@10), a query that is a
document of the corpus (ArguAna's are its arguments) not answered by itself:

- bm25s: bm25s's tokenizer (English stemmer and stopwords) and its defaults (k1 = 1.5,
  b = 0.75), as the bm25s arm of `subspace eval`; a word repeated in a query counts as often
  as it appears, as bm25s and Lucene count it.
- bm25s_unique: the same with each query word counted once.
- our_tokens: bm25s over the lexemes our index stores (search.document_tsvector, each
  lexeme as often as it has positions, so a document's length is our length column) with
  our k1 = 1.2 and b = 0.75 and the same idf as ours: the brute-force BM25 our lexical leg
  should equal; queries are analysed as documents are, repeats counted.
- our_tokens_unique: the same with each query lexeme counted once.

    python bench/bm25s_arms.py DATASET_DIR [--json]

Needs the [eval] extra and starts an embedded Postgres in a temporary folder for the analysis.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace.config import Settings
from subspace.database import open_database
from subspace.evaluation.beir import load_collection
from subspace.evaluation.metrics import evaluate
from subspace.search.lexical.bm25 import K1 as BM25_K1
from subspace.search.lexical.bm25 import B as BM25_B

DEPTH = 100  # documents ranked per query, as `subspace eval`
BATCH = 500  # texts analysed per round trip


def our_tokens(*groups: Sequence[str]) -> list[list[list[str]]]:
    """For each group of texts, each text's lexemes as our index stores them, one entry per
    position."""
    found: list[list[list[str]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        db = open_database(Settings(home=Path(tmp) / "home", providers="fake"), pool_size=1)
        try:
            with db.pool.connection() as conn:
                for texts in groups:
                    tokens: list[list[str]] = [[] for _ in texts]
                    for start in range(0, len(texts), BATCH):
                        rows = conn.execute(
                            "select d.i, u.lexeme, "
                            "coalesce(array_length(u.positions, 1), 1) as tf "
                            "from unnest(%s::text[]) with ordinality d(t, i), "
                            "unnest(search.document_tsvector(left(d.t, 100000))) u",
                            (list(texts[start : start + BATCH]),),
                        ).fetchall()
                        for r in rows:
                            tokens[start + r["i"] - 1].extend([r["lexeme"]] * r["tf"])
                    found.append(tokens)
        finally:
            db.close()
    return found


def ranked(corpus: list[list[str]], queries: list[list[str]], ids: list[str], *,
           unique: bool, **parameters: float) -> list[list[str]]:  # fmt: skip
    """The top DEPTH + 1 document ids of each query by bm25s over the given tokens (one more
    than kept, for the query's own document to be left out)."""
    import bm25s

    retriever = bm25s.BM25(**parameters)
    retriever.index(corpus, show_progress=False)
    vocabulary = set(retriever.vocab_dict)
    found: list[list[str]] = []
    for query in queries:
        words = [w for w in query if w in vocabulary]
        if unique:
            words = list(dict.fromkeys(words))
        if not words:
            found.append([])
            continue
        docs, scores = retriever.retrieve([words], k=min(DEPTH + 1, len(ids)),
                                          show_progress=False)  # fmt: skip
        found.append([ids[d] for d, s in zip(docs[0], scores[0], strict=True) if s > 0])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path, help="a BEIR-layout folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    import bm25s
    import Stemmer

    collection = load_collection(args.dataset)
    ids = list(collection.corpus)
    texts = [f"{t}. {x}" if t.strip() else x for t, x in collection.corpus.values()]
    qids = list(collection.queries)
    questions = [collection.queries[q] for q in qids]
    stemmer = Stemmer.Stemmer("english")

    def theirs(items: list[str]) -> list[list[str]]:
        tokens = bm25s.tokenize(items, stopwords="en", stemmer=stemmer, return_ids=False,
                                show_progress=False)  # fmt: skip
        return [list(t) for t in tokens]

    print(f"analysing {len(texts):,} documents and {len(qids)} queries", file=sys.stderr)
    corpus, queries = theirs(texts), theirs(questions)
    ours_corpus, ours_queries = our_tokens(texts, questions)
    ours_parameters = {"k1": BM25_K1, "b": BM25_B}
    arms = {
        "bm25s": ranked(corpus, queries, ids, unique=False),
        "bm25s_unique": ranked(corpus, queries, ids, unique=True),
        "our_tokens": ranked(ours_corpus, ours_queries, ids, unique=False, **ours_parameters),
        "our_tokens_unique": ranked(ours_corpus, ours_queries, ids, unique=True, **ours_parameters),
    }
    scores = {
        arm: evaluate({q: [d for d in found if d != q][:DEPTH]
                       for q, found in zip(qids, run, strict=True)}, collection.qrels)
        for arm, run in arms.items()
    }  # fmt: skip
    if args.json:
        print(json.dumps({"dataset": collection.name, "queries": len(qids), "arms": scores}))
        return
    print(f"{collection.name}: {len(qids)} queries, {len(ids):,} documents")
    print(f"{'arm':<20} {'nDCG@10':>8} {'R@100':>8} {'MRR@10':>8}")
    for arm, s in scores.items():
        print(f"{arm:<20} {s['ndcg@10']:>8.3f} {s['recall@100']:>8.3f} {s['mrr@10']:>8.3f}")


if __name__ == "__main__":
    main()
