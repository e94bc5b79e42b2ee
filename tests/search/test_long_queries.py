"""The long-query collection bench/long_queries.py makes: BEIR layout, no query copied whole."""

from __future__ import annotations

import json
from pathlib import Path

from bench.corpus import sentences
from bench.long_queries import make_collection

from subspace.evaluation.beir import load_collection

SENTENCES = [f"Sentence {n} of document {{d}} mentions protein {n}." for n in range(1, 9)]


def write_corpus(path: Path) -> None:
    docs = [
        {"_id": f"d{d}", "title": f"Title {d}", "text": " ".join(s.format(d=d) for s in SENTENCES)}
        for d in range(6)
    ] + [{"_id": "short", "title": "Short", "text": "Too short. To be a query."}]
    path.write_text("".join(json.dumps(doc) + "\n" for doc in docs), encoding="utf-8")


def test_each_query_is_three_to_five_sentences_its_document_no_longer_holds(
    tmp_path: Path,
) -> None:
    write_corpus(tmp_path / "scifact.jsonl")
    written = make_collection(tmp_path / "scifact.jsonl", tmp_path / "long", count=4)
    collection = load_collection(tmp_path / "long")
    assert written == len(collection.queries) == 4
    assert len(collection.corpus) == 7  # every document stays, judged or not
    assert "short" not in {doc for judged in collection.qrels.values() for doc in judged}
    for qid, text in collection.queries.items():
        assert collection.qrels[qid] == {qid.removeprefix("lq-"): 1}
        title, body = collection.corpus[qid.removeprefix("lq-")]
        asked, kept = sentences(text), sentences(body)
        assert 3 <= len(asked) <= 5
        assert len(asked) + len(kept) == len(SENTENCES)
        assert not set(asked) & set(kept)
        assert title == f"Title {qid.removeprefix('lq-d')}"


def test_the_collection_is_the_same_on_every_run(tmp_path: Path) -> None:
    write_corpus(tmp_path / "scifact.jsonl")
    make_collection(tmp_path / "scifact.jsonl", tmp_path / "a", count=4)
    make_collection(tmp_path / "scifact.jsonl", tmp_path / "b", count=4)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
