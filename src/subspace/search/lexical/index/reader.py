"""How a process reads the lexical index: one consistent view of the generation CURRENT
names, refreshed when the follower records a new position or a rebuild swaps generations,
never of a generation whose files fail their checks (search/lexical/index/integrity.py).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy

from subspace.search.lexical.index.integrity import (
    MISSING,
    Checksums,
    check_generation,
    engine_failed,
    report_damage,
)
from subspace.search.lexical.index.layout import (
    CURRENT,
    DISK_FULL,
    SCHEMA,
    STATE,
    TEXT,
    State,
    open_index,
)

log = logging.getLogger(__name__)


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
        self._generation: Path | None = None  # the generation whose indexes are open
        self._watched: Path | None = None  # the one CURRENT named at the last load
        self._indexes: dict[str, tantivy.Index] = {}
        self._view: EngineView | None = None
        self._checksums = Checksums()
        self.problem = "the index has not been built yet"

    def view(self) -> EngineView | None:
        """The current view; None when there is no usable index (`problem` says why)."""
        with self._lock:
            stamp = self._stamp()
            if stamp != self._seen:
                watched = self._watched
                self._view = self._load()
                # A stamp taken before the load: a commit during it is seen at the next
                # search. Another generation has its own state file to watch.
                self._seen = stamp if self._watched == watched else self._stamp()
            return self._view

    def failed(self, view: EngineView, exc: BaseException) -> bool:
        """A search failed on `view`: check every file of its generation again; True when one
        is damaged, and then the generation is not served again (and the follower is told,
        by the DAMAGED note, to rebuild it). A failure its files do not explain fails that
        search alone."""
        with self._lock:
            generation = self._generation
            if generation is None or view is not self._view:
                return False  # another search found it out first, or a new view replaced it
            self._checksums.forget(generation)
            damage = self._checksums.damage(generation, view.kinds)
            if damage is None:
                log.warning("the lexical engine failed on a search, its files are whole: %r", exc)
                return False
            log.warning("the lexical index in %s is damaged: %s", generation, damage)
            why = f"a file of the index is damaged ({damage})"
            report_damage(self.folder, generation, why)
            self._close(why)
            return True

    def disk_full(self) -> str:
        """Why the follower cannot write the index when its disk is full; "" otherwise."""
        if not (self.folder / DISK_FULL).exists():
            return ""
        try:
            free = shutil.disk_usage(self.folder).free
        except OSError:
            return "the disk holding the lexical index is full"
        return f"the disk holding the lexical index is full ({free / 1e6:,.1f} MB free)"

    def _stamp(self) -> tuple[Any, ...]:
        """What changes when the follower commits (its state file is replaced) or a rebuild
        swaps generations (CURRENT is): two stat calls a search, no read."""
        state = None if self._watched is None else self._watched / STATE
        return (_file_stamp(self.folder / CURRENT), _file_stamp(state))

    def _close(self, problem: str) -> None:
        self._generation, self._indexes, self._view = None, {}, None
        self.problem = problem

    def _load(self) -> EngineView | None:
        generation, problem = check_generation(
            self.folder, self._checksums, lambda state: state.fits(self.database)
        )
        self._watched = generation
        state = None if generation is None else State.read(generation / STATE)
        if problem or generation is None or state is None or state.position is None:
            self._close(problem or MISSING)
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
        except BaseException as exc:
            if not engine_failed(exc):
                raise
            log.warning("cannot read the lexical index in %s: %s", generation, exc)
            self._close("the index cannot be read")
            return None
        self.problem = ""
        return EngineView(state.position, searchers, stats, state.kinds)
