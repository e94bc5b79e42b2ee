"""The lexical engine's index on disk: a Tantivy index per BM25 source, derived from Postgres
like the embeddings, in one folder per database; and how a process reads it.

    <root>/<database>/CURRENT         the generation in use (a rebuild writes a new one, then
                                      points CURRENT at it)
    <root>/<database>/follower.lock   held by the one process that writes (indexer/lexical.py)
    <root>/<database>/<generation>/state.json   format, database, kinds, position applied
    <root>/<database>/<generation>/<source>/    one Tantivy index per BM25 source

One index per source, because BM25 weighs a document's length against the average of its own
source (a title against titles, a file chunk against chunks), and Tantivy averages over a
whole index. Each document is one row of a kind (a title, a bullet, a chunk, a mail), its
text the lexemes Postgres's generated tsvector holds at their positions, so the engine and
Postgres agree token for token; its filter fields name its knowledge base, kind, item and
the reasons hiding it.

The position is a Postgres snapshot: the index holds every write committed in it. state.json
is written after the indexes commit, so the position a reader finds is never newer than the
documents it then reloads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import tantivy

from subspace.search import registry

log = logging.getLogger(__name__)

FORMAT = 3  # the layout and analysis of the documents; another format is rebuilt
TEXT = "text"  # the lexemes, at their positions
ITEM = "item"  # the page, file or mail the row belongs to (its id's hex)
TARGET = "target"  # what the row is found as (a bullet's id, a file's...): its id's hex
KB = "kb"  # its knowledge base (hex)
KIND = "kind"  # its kind's name (node or memory share the node source)
HIDDEN = "hidden"  # the reasons hiding it (HIDDEN_ANY when there is one)
ANSWER = "answer"  # ANSWER_YES for a row an answer run asked with or wrote
HIDDEN_ANY = "any"
ANSWER_YES = "yes"
# Numbers read back from each hit (Searcher.fast_field_values reads numbers only): the
# target's and the item's ids as two 64-bit halves, the row's part (a chunk's n) and the
# kind's place among its source's kinds; and a digest of everything the document holds, so
# two indexes can be compared document for document.
TARGET_HI, TARGET_LO, ITEM_HI, ITEM_LO, PART, KIND_CODE, DIGEST = (
    "target_hi", "target_lo", "item_hi", "item_lo", "part", "kind_code", "digest"
)  # fmt: skip
WRITER_HEAP_BYTES = 32_000_000  # per source; Tantivy flushes a segment when it fills
STATE = "state.json"
CURRENT = "CURRENT"
LOCK = "follower.lock"


def schema() -> tantivy.Schema:
    """The fields of every source's index."""
    builder = tantivy.SchemaBuilder()
    builder.add_text_field(TEXT, tokenizer_name="raw", index_option="position")
    for name in (ITEM, TARGET, KB, KIND, HIDDEN, ANSWER):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    for name in (TARGET_HI, TARGET_LO, ITEM_HI, ITEM_LO, PART, KIND_CODE, DIGEST):
        builder.add_unsigned_field(name, fast=True)
    return builder.build()


SCHEMA = schema()


def uuid_halves(ident: UUID) -> tuple[int, int]:
    return ident.int >> 64, ident.int & (2**64 - 1)


def uuid_of(hi: int, lo: int) -> UUID:
    return UUID(int=(hi << 64) | lo)


def source_kinds() -> dict[str, list[str]]:
    """Each BM25 source's kinds in registry order: a kind's code is its place here."""
    return {source: [s.name for s in registry.of_source(source)] for source in registry.sources()}


@dataclass(frozen=True)
class IndexDocument:
    """One row of a kind as the engine holds it."""

    source: str
    kind: str
    target: UUID
    item: UUID
    kb: UUID
    part: int
    hidden: tuple[str, ...]
    answer: bool
    lexemes: Sequence[str]  # in position order, a lexeme once per position
    positions: Sequence[int]

    def to_tantivy(self, kinds: Sequence[str]) -> tantivy.Document:
        doc = tantivy.Document()
        tokens = [
            tantivy.Token(lexeme, position, 0, 0)
            for lexeme, position in zip(self.lexemes, self.positions, strict=True)
        ]
        doc.add_pre_tokenized_text(TEXT, tantivy.PreTokenizedString("", tokens))
        doc.add_text(ITEM, self.item.hex)
        doc.add_text(TARGET, self.target.hex)
        doc.add_text(KB, self.kb.hex)
        doc.add_text(KIND, self.kind)
        for reason in (HIDDEN_ANY, *self.hidden) if self.hidden else ():
            doc.add_text(HIDDEN, reason)
        if self.answer:
            doc.add_text(ANSWER, ANSWER_YES)
        for name, value in zip(
            (TARGET_HI, TARGET_LO, ITEM_HI, ITEM_LO),
            (*uuid_halves(self.target), *uuid_halves(self.item)),
            strict=True,
        ):
            doc.add_unsigned(name, value)
        doc.add_unsigned(PART, self.part)
        doc.add_unsigned(KIND_CODE, kinds.index(self.kind))
        doc.add_unsigned(DIGEST, self.digest())
        return doc

    def digest(self) -> int:
        """64 bits that change with anything the document holds."""
        held = hashlib.blake2b(digest_size=8)
        for value in (self.source, self.kind, self.target.hex, self.item.hex, self.kb.hex,
                      str(self.part), ",".join(self.hidden), str(self.answer)):  # fmt: skip
            held.update(value.encode())
            held.update(b"\0")
        held.update(" ".join(self.lexemes).encode())
        held.update(b"\0")
        held.update(",".join(map(str, self.positions)).encode())
        return int.from_bytes(held.digest(), "big")


@dataclass(frozen=True)
class State:
    """What a generation holds: its format, the database and kinds it was built for, and the
    Postgres snapshot whose writes it holds (None while a rebuild has not finished)."""

    format: int
    database: str
    kinds: dict[str, list[str]]
    position: str | None

    def fits(self, database: str) -> bool:
        """Whether this generation can serve `database` with the kinds registered now."""
        return (
            self.format == FORMAT
            and self.database == database
            and self.kinds == source_kinds()
            and self.position is not None
        )

    @staticmethod
    def read(path: Path) -> State | None:
        """The state in `path`; None when it is missing or unreadable."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return State(int(raw["format"]), str(raw["database"]), dict(raw["kinds"]),
                         raw["position"])  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, path: Path) -> None:
        """Write atomically: a reader finds the old state or the new, never half of one."""
        data = {"format": self.format, "database": self.database, "kinds": self.kinds,
                "position": self.position}  # fmt: skip
        write_atomically(path, json.dumps(data, sort_keys=True))


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    with temporary.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def database_folder(root: Path, identity: str) -> Path:
    """The folder of one database's index under `root`: two databases never share one."""
    return root / hashlib.sha256(identity.encode()).hexdigest()[:16]


def current_generation(folder: Path) -> Path | None:
    """The generation CURRENT names in `folder`, if it names one that exists."""
    try:
        name = (folder / CURRENT).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    path = folder / name
    return path if name and "/" not in name and path.is_dir() else None


def open_index(generation: Path, source: str, *, create: bool = False) -> tantivy.Index:
    """The index of `source` in `generation` (made when `create`); ValueError when it is
    missing or not an index of this schema."""
    path = generation / source
    if create:
        path.mkdir(parents=True, exist_ok=True)
    elif not tantivy.Index.exists(str(path)):
        raise ValueError(f"no index of source {source!r} in {generation}")
    index = tantivy.Index(SCHEMA, path=str(path), reuse=True)
    index.config_reader(reload_policy="manual")
    return index


@dataclass(frozen=True)
class EngineStats:
    """What Tantivy scores a source with: its documents, deleted ones not yet merged away
    included, and their average length. Both are read from an explanation of a score, as
    the engine's own numbers."""

    documents: int
    average_length: float


@dataclass(frozen=True)
class EngineView:
    """One consistent reading of the index: the position it holds and, per source, the
    searcher and the statistics it scores with. A search uses one view throughout."""

    position: str
    searchers: Mapping[str, tantivy.Searcher]
    stats: Mapping[str, EngineStats]
    kinds: Mapping[str, list[str]]

    def holding(self, source: str, lexeme: str) -> int:
        """Documents of `source` in the engine holding `lexeme` (deleted ones included, as
        the engine's idf counts them)."""
        searcher = self.searchers.get(source)
        return 0 if searcher is None else int(searcher.doc_freq(TEXT, lexeme))


def engine_stats(searcher: tantivy.Searcher) -> EngineStats | None:
    """Read N and avgdl off the explanation of one term's score in one document; None for an
    index without a live document."""
    for term, _ in searcher.terms_with_prefix(TEXT, "", limit=64):
        query = tantivy.Query.term_query(SCHEMA, TEXT, term, index_option="position")
        hits = searcher.search(query, 1, count=False).hits
        if not hits:
            continue  # every document holding it was deleted
        explained = json.loads(query.explain(searcher, hits[0][1]).to_json())
        found = dict(_explained_values(explained))
        return EngineStats(int(found["N"]), float(found["avgdl"]))
    return None


def _explained_values(node: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """(name, value) of each detail of an explanation named before its first comma
    ("N, total number of docs" -> N)."""
    description = str(node.get("description", ""))
    name = description.split(",", 1)[0].strip()
    if name in ("N", "avgdl", "n", "dl"):
        yield name, float(node["value"])
    for child in node.get("details", []) or []:
        yield from _explained_values(child)


def _file_stamp(path: Path | None) -> tuple[int, int] | None:
    """A file's inode and modification time (a replaced file has a new inode)."""
    if path is None:
        return None
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_ino, status.st_mtime_ns


class LexicalReader:
    """The index as one process reads it: a view refreshed when the follower records a new
    position or a rebuild swaps the generation. Thread-safe; views are immutable."""

    def __init__(self, folder: Path, database: str) -> None:
        self.folder = folder
        self.database = database
        self._lock = threading.Lock()
        self._seen: tuple[Any, ...] | None = None
        self._generation: Path | None = None
        self._indexes: dict[str, tantivy.Index] = {}
        self._view: EngineView | None = None
        self.problem = "the index has not been built yet"

    def view(self) -> EngineView | None:
        """The current view; None when there is no usable index (`problem` says why)."""
        with self._lock:
            stamp = self._stamp()
            if stamp != self._seen:
                opened = self._generation
                self._view = self._load()
                # A stamp taken before the load: a commit during it is seen at the next
                # search. Another generation opened has its own state file to watch.
                self._seen = stamp if self._generation == opened else self._stamp()
            return self._view

    def _stamp(self) -> tuple[Any, ...]:
        """What changes when the follower commits (its state file is replaced) or a rebuild
        swaps generations (CURRENT is): two stat calls a search, no read."""
        state = None if self._generation is None else self._generation / STATE
        return (_file_stamp(self.folder / CURRENT), _file_stamp(state))

    def _load(self) -> EngineView | None:
        generation = current_generation(self.folder)
        if generation is None:
            self.problem = "the index is missing"
            return None
        state = State.read(generation / STATE)
        if state is None or not state.fits(self.database) or state.position is None:
            self.problem = "the index is of another database, format or set of kinds"
            return None
        try:
            if generation != self._generation:
                self._indexes = {s: open_index(generation, s) for s in state.kinds}
                self._generation = generation
            searchers = {}
            stats = {}
            for source, index in self._indexes.items():
                index.reload()
                searchers[source] = index.searcher()
                found = engine_stats(searchers[source])
                if found is not None:
                    stats[source] = found
        except (ValueError, OSError) as exc:
            log.warning("cannot read the lexical index in %s: %s", generation, exc)
            self._generation = None
            self._indexes = {}
            self.problem = "the index cannot be read"
            return None
        self.problem = ""
        return EngineView(state.position, searchers, stats, state.kinds)


def documents(generation: Path, source: str) -> set[tuple[UUID, int, int, int]]:
    """Each live document of `source` in `generation` as (target, part, kind code, digest):
    what two indexes are compared by."""
    index = open_index(generation, source)
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False)
    addresses = [address for _, address in hits.hits]
    if not addresses:
        return set()
    names = (TARGET_HI, TARGET_LO, PART, KIND_CODE, DIGEST)
    columns = zip(*(searcher.fast_field_values(n, addresses) for n in names), strict=True)
    return {
        (uuid_of(int(hi), int(lo)), int(part), int(kind), int(digest))
        for hi, lo, part, kind, digest in columns
    }
