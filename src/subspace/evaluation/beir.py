"""A BEIR-layout collection: reading it, loading it into a database, and the deterministic
typo perturbation of queries.

Each document becomes a page whose one bullet holds the document (its title and text as one
paragraph); the search runs on bullets only, so one result is one document.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from subspace import commands
from subspace.context import Context
from subspace.errors import InvalidInput
from subspace.evaluation.loaded import Loaded
from subspace.evaluation.metrics import BEIR_METRICS
from subspace.ingest.outline import OutlineItem

DEPTH = 100  # documents retrieved per query (Recall@100)


@dataclass
class Collection:
    name: str
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]  # query id -> text, only the judged ones
    qrels: dict[str, dict[str, int]]


def load_collection(folder: Path, split: str = "test") -> Collection:
    """corpus.jsonl, queries.jsonl and qrels/<split>.tsv from `folder`. A line that breaks the
    layout (not JSON, a repeated `_id`, a title that is not text) is refused with its file
    and line, since a collection read differently from what its judges read scores nothing."""
    paths = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"]
    for path in paths:
        if not path.is_file():
            raise InvalidInput(
                f"{path} is missing. A BEIR collection has corpus.jsonl, queries.jsonl and "
                f"qrels/{split}.tsv."
            )
    corpus = {
        doc_id: (fields["title"], fields["text"])
        for doc_id, fields in _records(paths[0], ("title", "text")).items()
    }
    qrels = _qrels(paths[2])
    queries = {
        query_id: fields["text"]
        for query_id, fields in _records(paths[1], ("text",)).items()
        if query_id in qrels
    }
    return Collection(folder.name, corpus, queries, qrels)


def _records(path: Path, fields: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Each line's `_id` -> its `fields` as text (missing or null: ""), in the file's order.
    Blank lines are passed over; a byte-order mark is allowed."""
    records: dict[str, dict[str, str]] = {}
    line_of: dict[str, int] = {}
    for number, line in _lines(path):
        where = f"{path.name} line {number}"
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"{where} is not JSON ({exc}).") from None
        if not isinstance(record, dict):
            raise InvalidInput(f"{where} is not a JSON object with an _id.")
        key = record.get("_id")
        if not isinstance(key, str | int) or isinstance(key, bool) or str(key) == "":
            raise InvalidInput(f"{where} has no _id (a string or a number).")
        key = str(key)
        if key in records:
            raise InvalidInput(f"{where} repeats the _id {key!r} of line {line_of[key]}.")
        values = {}
        for name in fields:
            value = record.get(name)
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{where}: {name} must be text, not {type(value).__name__}.")
            values[name] = value or ""
        records[key], line_of[key] = values, number
    return records


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> document id -> grade, from a TSV whose header names those columns."""
    qrels: dict[str, dict[str, int]] = {}
    columns: list[str] = []
    for number, line in _lines(path):
        cells = line.rstrip("\r\n").split("\t")
        if not columns:
            columns = cells
            if not {"query-id", "corpus-id", "score"} <= set(columns):
                raise InvalidInput(
                    f"{path.name} must start with the header: query-id, corpus-id, score."
                )
            continue
        row = dict(zip(columns, cells, strict=False))
        try:
            grade = int(row["score"])
        except (KeyError, ValueError):
            raise InvalidInput(
                f"{path.name} line {number}: score must be a whole number, "
                f"not {row.get('score')!r}."
            ) from None
        qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = grade
    return qrels


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's non-blank lines with their numbers (from 1), read as UTF-8 (a byte-order
    mark allowed)."""
    number = 0
    try:
        with path.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield number, line
    except UnicodeDecodeError:
        raise InvalidInput(
            f"{path.name} is not UTF-8 (the first bad byte is after line {number}); "
            "save it as UTF-8."
        ) from None


def write_corpus(collection: Collection, folder: Path, titled: bool = False) -> dict[str, str]:
    """One Markdown file per document; returns the file hash -> document id (documents with
    the same text share one file). Titled, the title is the page's alone and the bullet holds
    the text; otherwise the bullet holds both."""
    by_hash = {}
    for doc_id, (title, text) in collection.corpus.items():
        heading, body = document_page(title, text, doc_id, titled)
        data = f"# {heading}\n\n{body}\n".encode()
        (folder / f"{hashlib.sha1(doc_id.encode()).hexdigest()}.md").write_bytes(data)
        by_hash[hashlib.sha256(data).hexdigest()] = doc_id
    return by_hash


def document_page(title: str, text: str, doc_id: str, titled: bool) -> tuple[str, str]:
    """A document as the page eval imports: its title (the document's, else its id) and
    the one bullet's text ("" for an empty document, which makes no bullet). Titled, the
    bullet holds the text alone; otherwise the title and the text."""
    heading = " ".join(title.split()) or doc_id
    body = (
        " ".join(f"{title.strip()}. {text}".split())
        if title.strip() and not titled
        else " ".join(text.split())
    )
    return heading, body


def import_collection(cx: Context, collection: Collection, titled: bool = False) -> Loaded:
    """Import every document into a new knowledge base, one page each (with its text in one
    bullet), through the page command: each bullet stands for its document, and titled, its
    page's title does too. Documents with the same text are each imported; an empty one makes
    a page without a bullet, so nothing can find it unless it has a title to find it by."""
    kb = commands.create_knowledge_base(cx, f"eval {collection.name}")
    doc_of_page: dict[UUID, str] = {}
    texts: dict[str, str] = {}
    cut = 0
    for doc_id, (title, text) in collection.corpus.items():
        heading, body = document_page(title, text, doc_id, titled)
        # One bullet per document, as long as a bullet may be: a longer one is ranked by
        # its start (the reference arms read the same text), and the report says how many.
        cut += len(body) > cx.settings.max_node_chars
        body = body[: cx.settings.max_node_chars]
        items = [OutlineItem(body)] if body else []
        page = commands.create_page_from_outline(cx, heading, items, kb_id=kb.id)
        doc_of_page[page.id] = doc_id
        # The reference arms read each document as the untitled bullet holds it; one with
        # no text at all is nothing they can index (nor can our search find it).
        reference = document_page(title, text, doc_id, False)[1] if titled else body
        reference = reference[: cx.settings.max_node_chars]
        if reference:
            texts[doc_id] = reference
    with cx.transaction() as conn:
        bullets = conn.execute(
            "select n.id, n.page_id from kb.nodes n join kb.pages p "
            "on p.workspace_id = n.workspace_id and p.id = n.page_id where p.kb_id = %s",
            (kb.id,),
        ).fetchall()
    target_of = {r["id"]: doc_of_page[r["page_id"]] for r in bullets}
    if titled:
        target_of |= doc_of_page
    return Loaded(
        name=collection.name,
        queries=collection.queries,
        qrels=collection.qrels,
        expect_empty=frozenset(),
        target_of=target_of,
        texts=texts,  # in the corpus's order
        kinds=["page", "node"] if titled else ["node"],
        depth=DEPTH,
        metrics=BEIR_METRICS,
        cut_documents=cut,
        own_documents=frozenset(collection.queries) & frozenset(collection.corpus),
    )


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
