"""The lexical engine's index on disk: a Tantivy index per workspace and BM25 source, derived
from Postgres like the embeddings, in one folder per database (reader.py reads it).

    <root>/<database>/CURRENT         the generation in use (a rebuild writes a new one, then
                                      points CURRENT at it)
    <root>/<database>/follower.lock   held by the one process that writes (follower.py)
    <root>/<database>/DISK_FULL       there while the follower's writes fail for lack of space
    <root>/<database>/<generation>/state.json   format, database, kinds, position applied,
                                                the workspaces held and their documents
    <root>/<database>/<generation>/<workspace>/<source>/   one Tantivy index each

One index per source, because BM25 weighs a document's length against the average of its own
source (a title against titles, a file chunk against chunks), and Tantivy averages over a
whole index. One per workspace, because that average (inside the term-frequency part of a
score, where no boost reaches) would otherwise be every workspace's: one tenant's writes
would move another's scores and tell it how much the tenant writes. A workspace's folder is
made with every source's index at once, so a folder that state.json lists and that lacks one
is damaged, not empty. Each document is one row of a kind (a title, a bullet, a chunk, a mail), its
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
import os
import re
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import tantivy

from subspace.config import Settings
from subspace.db.pool import Conn
from subspace.search import registry

FORMAT = 5  # the layout and analysis of the documents; another format is rebuilt (5: a
# bullet's words are its Markdown's plain text, migration 0031)
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
# Per open writer (one per workspace and source); Tantivy flushes a segment when it fills,
# and takes no less than 15 MB.
WRITER_HEAP_BYTES = 16_000_000
STATE = "state.json"
META = "meta.json"  # Tantivy's list of an index's segments, replaced at each commit and merge
CURRENT = "CURRENT"
SNAPSHOT = re.compile(r"[0-9]{1,20}:[0-9]{1,20}:([0-9]{1,20}(,[0-9]{1,20})*)?")  # pg_snapshot
LSN = re.compile(r"[0-9A-F]{1,8}/[0-9A-F]{1,8}")  # pg_lsn, as Postgres prints it
GENERATION_NAME = re.compile(r"g[0-9]{1,20}")  # as generation_name() makes them
HEX = re.compile(r"[0-9a-f]{32}")  # a workspace's folder: its id's hex
LOCK = "follower.lock"
DISK_FULL = "DISK_FULL"  # made by the follower while its disk is full, removed once it writes


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

    workspace: UUID
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
    """What a generation holds: its format, the database and kinds it was built for, the
    Postgres snapshot whose writes it holds (None while a rebuild has not finished), and the
    workspaces it has a folder for, each with its live documents."""

    format: int
    database: str
    kinds: dict[str, list[str]]
    position: str | None
    workspaces: dict[str, int] = field(default_factory=dict)  # workspace hex -> documents
    # The primary's WAL position when the snapshot was taken: a replica that has replayed it
    # holds every write the index does, so a search may read it there (db/replicas.py).
    lsn: str | None = None

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
        """The state in `path`; None when it is missing, unreadable, or holds anything but a
        state (a position that is not a Postgres snapshot, kinds that are not lists…)."""
        try:
            raw = read_json(path)
            kinds, position = raw["kinds"], raw["position"]
            if not isinstance(kinds, dict) or not all(
                isinstance(names, list) and all(isinstance(n, str) for n in names)
                for names in kinds.values()
            ):
                return None
            if position is not None and not (
                isinstance(position, str) and SNAPSHOT.fullmatch(position)
            ):
                return None
            workspaces = raw.get("workspaces", {})
            if not isinstance(workspaces, dict) or not all(
                isinstance(name, str) and HEX.fullmatch(name) and type(count) is int
                for name, count in workspaces.items()
            ):
                return None
            lsn = raw.get("lsn")
            if lsn is not None and not (isinstance(lsn, str) and LSN.fullmatch(lsn)):
                return None
            return State(int(raw["format"]), str(raw["database"]), kinds, position, workspaces, lsn)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, path: Path) -> None:
        """Write atomically: a reader finds the old state or the new, never half of one."""
        data = {"format": self.format, "database": self.database, "kinds": self.kinds,
                "position": self.position, "workspaces": self.workspaces,
                "lsn": self.lsn}  # fmt: skip
        write_atomically(path, json.dumps(data, sort_keys=True))


def read_json(path: Path) -> Any:
    """A small JSON file's value. ValueError for any bytes that are not JSON, nesting too
    deep for the parser included (json raises RecursionError there); OSError as read."""
    raw = path.read_bytes()
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError(f"{path.name} nests too deep to be ours") from None


def write_atomically(path: Path, text: str) -> None:
    """Write, fsync, rename: a reader finds the old file or the new one. Whatever stands in
    the way (a folder, a link) is removed first."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def index_root(settings: Settings) -> Path:
    """The folder holding the lexical indexes: SUBSPACE_LEXICAL_DIR, else under the home."""
    return settings.lexical_dir or settings.home / "lexical"


def database_identity(conn: Conn) -> str:
    """What an index records as the database it serves (migration 0021)."""
    row = conn.execute("select search.database_identity() as identity").fetchone()
    assert row is not None
    return str(row["identity"])


def database_folder(root: Path, identity: str) -> Path:
    """The folder of one database's index under `root`: two databases never share one."""
    return root / hashlib.sha256(identity.encode()).hexdigest()[:16]


def generation_name() -> str:
    """A new generation's folder name: later ones sort after earlier ones."""
    return f"g{time.time_ns()}"


def generation_named(folder: Path) -> str | None:
    """The generation name CURRENT holds, if it holds one (missing, empty or any other bytes:
    None)."""
    try:
        name = (folder / CURRENT).read_bytes().strip().decode("ascii", errors="replace")
    except OSError:
        return None
    return name if GENERATION_NAME.fullmatch(name) else None


def current_generation(folder: Path) -> Path | None:
    """The generation CURRENT names in `folder`, if it names one that exists; None whatever
    else CURRENT holds (missing, empty, any bytes at all)."""
    name = generation_named(folder)
    return None if name is None or not (folder / name).is_dir() else folder / name


def workspace_folder(generation: Path, workspace: UUID) -> Path:
    """The folder of one workspace's indexes in `generation`."""
    return generation / workspace.hex


def create_indexes(folder: Path, sources: Sequence[str]) -> None:
    """Make a workspace's folder with an empty index of every source (no writer needed)."""
    for source in sources:
        path = folder / source
        path.mkdir(parents=True, exist_ok=True)
        if not tantivy.Index.exists(str(path)):
            tantivy.Index(SCHEMA, path=str(path), reuse=False)


def open_index(folder: Path, source: str) -> tantivy.Index:
    """The index of `source` in a workspace's `folder`; ValueError when it is missing or not
    an index of this schema."""
    path = folder / source
    if not tantivy.Index.exists(str(path)):
        raise ValueError(f"no index of source {source!r} in {folder}")
    index = tantivy.Index(SCHEMA, path=str(path), reuse=True)
    index.config_reader(reload_policy="manual")
    return index


def documents(generation: Path, source: str) -> set[tuple[UUID, int, int, int]]:
    """Each live document of `source` in `generation`, every workspace's, as (target, part,
    kind code, digest): what two indexes are compared by."""
    state = State.read(generation / STATE)
    assert state is not None, f"no state in {generation}"
    found: set[tuple[UUID, int, int, int]] = set()
    for workspace in state.workspaces:
        index = open_index(generation / workspace, source)
        searcher = index.searcher()
        hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False)
        addresses = [address for _, address in hits.hits]
        if not addresses:
            continue
        names = (TARGET_HI, TARGET_LO, PART, KIND_CODE, DIGEST)
        columns = zip(*(searcher.fast_field_values(n, addresses) for n in names), strict=True)
        found |= {
            (uuid_of(int(hi), int(lo)), int(part), int(kind), int(digest))
            for hi, lo, part, kind, digest in columns
        }
    return found
