"""Reading a BEIR-layout collection, and the deterministic typo perturbation of queries."""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from subspace.errors import InvalidInput


@dataclass
class Collection:
    name: str
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]  # query id -> text, only the judged ones
    qrels: dict[str, dict[str, int]]


def load_collection(folder: Path, split: str = "test") -> Collection:
    """corpus.jsonl, queries.jsonl and qrels/<split>.tsv from `folder`."""
    paths = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"]
    for path in paths:
        if not path.is_file():
            raise InvalidInput(
                f"{path} is missing. A BEIR collection has corpus.jsonl, queries.jsonl and "
                f"qrels/{split}.tsv."
            )
    corpus = {}
    with paths[0].open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            corpus[str(doc["_id"])] = (doc.get("title") or "", doc.get("text") or "")
    qrels: dict[str, dict[str, int]] = {}
    with paths[2].open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    queries = {}
    with paths[1].open(encoding="utf-8") as handle:
        for line in handle:
            query = json.loads(line)
            if str(query["_id"]) in qrels:
                queries[str(query["_id"])] = query["text"]
    return Collection(folder.name, corpus, queries, qrels)


def add_typos(text: str) -> str:
    """Swap two inner letters in about half the words of five or more letters.

    Deterministic: the same word in the same query always gets the same typo.
    """
    words = text.split(" ")
    for index, word in enumerate(words):
        letters = [i for i, c in enumerate(word) if c.isalpha()]
        if len(letters) < 5:
            continue
        digest = hashlib.md5(f"{index}:{word}".encode(), usedforsecurity=False).digest()
        if digest[0] % 2:
            continue
        inner = letters[1:-1]
        at = inner[digest[1] % (len(inner) - 1)]
        if at + 1 < len(word) and word[at + 1].isalpha() and word[at] != word[at + 1]:
            chars = list(word)
            chars[at], chars[at + 1] = chars[at + 1], chars[at]
            words[index] = "".join(chars)
    return " ".join(words)
