"""How a process reads the lexical index: per workspace, one consistent view of its indexes in
the generation CURRENT names, refreshed when the follower records a new position or a
rebuild swaps generations, never of indexes whose files fail their checks (integrity.py).
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple
from uuid import UUID

import tantivy

from subspace.search.lexical.index.integrity import (
    MISSING,
    Checksums,
    Stamp,
    check_generation,
    engine_failed,
    file_stamp,
    report_damage,
)
from subspace.search.lexical.index.layout import (
    CURRENT,
    DISK_FULL,
    META,
    SCHEMA,
    STATE,
    TEXT,
    State,
    open_index,
    workspace_folder,
)

log = logging.getLogger(__name__)

# Each open index maps about eight files, and Linux allows a process 65,530 mappings: past
# these, the least recently searched workspaces are closed (and opened again in a ms).
OPEN_INDEXES = 2_048
OPEN_VIEWS = 512


@dataclass(frozen=True)
class EngineStats:
    """What Tantivy scores a source with: its documents, deleted ones not yet merged away
    included, and their average length. Both are read from an explanation of a score, as
    the engine's own numbers."""

    documents: int
    average_length: float


@dataclass(frozen=True)
class EngineView:
    """One consistent reading of a workspace's indexes: the position they hold and, per
    source, the searcher and the statistics it scores with (none for a workspace the index
    holds nothing of). A search uses one view throughout."""

    workspace: UUID
    position: str
    searchers: Mapping[str, tantivy.Searcher]
    stats: Mapping[str, EngineStats]
    kinds: Mapping[str, list[str]]

    def holding(self, source: str, lexeme: str) -> int:
        """Documents of `source` in the engine holding `lexeme` (deleted ones included, as
        the engine's idf counts them)."""
        searcher = self.searchers.get(source)
        return 0 if searcher is None else int(searcher.doc_freq(TEXT, lexeme))


def engine_stats(
    searcher: tantivy.Searcher, known: str | None = None
) -> tuple[EngineStats, str] | None:
    """Read N and avgdl off the explanation of one term's score in one document, and the term
    read; None for an index without a live document.

    Any term of a live document will do. `known`, one that did before, is tried first:
    finding one among the index's terms ranks them all by their documents, 28 ms for the
    files of 100,000 chunks, where the known one costs a lookup.
    """
    if known is not None:
        found = _stats_from(searcher, known)
        if found is not None:
            return found, known
    for term, _ in searcher.terms_with_prefix(TEXT, "", limit=64):
        found = _stats_from(searcher, term)
        if found is not None:
            return found, term
    return None


def _stats_from(searcher: tantivy.Searcher, term: str) -> EngineStats | None:
    """The statistics an explanation of `term`'s score gives; None when no live document
    holds it (every one holding it was deleted)."""
    query = tantivy.Query.term_query(SCHEMA, TEXT, term, index_option="position")
    hits = searcher.search(query, 1, count=False).hits
    if not hits:
        return None
    explained = json.loads(query.explain(searcher, hits[0][1]).to_json())
    found = dict(_explained_values(explained))
    return EngineStats(int(found["N"]), float(found["avgdl"]))


def _explained_values(node: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """(name, value) of each detail of an explanation named before its first comma
    ("N, total number of docs" -> N)."""
    description = str(node.get("description", ""))
    name = description.split(",", 1)[0].strip()
    if name in ("N", "avgdl", "n", "dl"):
        yield name, float(node["value"])
    for child in node.get("details", []) or []:
        yield from _explained_values(child)


class _Served(NamedTuple):
    """A workspace's view, and its files as they were when it was made (`_files_stamp`);
    None for a view that read none of them (it is never carried)."""

    view: EngineView
    made_from: tuple[Stamp | None, ...] | None


@dataclass
class _OpenIndex:
    """An index the reader holds open, and a term its statistics were read with."""

    index: tantivy.Index
    known_term: str | None = None


class LexicalReader:
    """The index as one process reads it: the generation's record, read again when the
    follower records a new position or a rebuild swaps the generation, and a view per
    workspace searched, made at its first search after the follower changed that
    workspace's files. Thread-safe; views are immutable."""

    def __init__(self, folder: Path, database: str) -> None:
        self.folder = folder
        self.database = database
        self._lock = threading.Lock()
        self._seen: tuple[Stamp | None, ...] | None = None
        self._generation: Path | None = None  # the generation being served
        self._state: State | None = None  # its record, while it serves
        self._watched: Path | None = None  # the one CURRENT named at the last load
        self._indexes: OrderedDict[tuple[Path, str], _OpenIndex] = OrderedDict()
        self._views: OrderedDict[UUID, _Served] = OrderedDict()
        self._checksums = Checksums()
        self.problem = "the index has not been built yet"

    def view(self, workspace: UUID) -> EngineView | None:
        """The workspace's current view; None when there is no usable index (`problem` says
        why)."""
        with self._lock:
            self._refresh()
            if self._state is None:
                return None
            served = self._views.get(workspace)
            if served is not None and served.view.position != self._state.position:
                served = self._carried(served)
            if served is None:
                served = self._load_workspace(workspace)
                if served is None:
                    return None
            self._views[workspace] = served
            self._views.move_to_end(workspace)
            if len(self._views) > OPEN_VIEWS:
                self._views.popitem(last=False)
            return served.view

    def held(self) -> tuple[str, int] | None:
        """The position the index holds and its live documents, every workspace's; None
        without a usable index."""
        with self._lock:
            self._refresh()
            state = self._state
            if state is None or state.position is None:
                return None
            return state.position, sum(state.workspaces.values())

    def held_lsn(self) -> str | None:
        """The primary's WAL position the index's snapshot was taken at: a replica that has
        replayed it holds every write the index does. None without a usable index, or one
        written before it was recorded."""
        with self._lock:
            self._refresh()
            return None if self._state is None else self._state.lsn

    def failed(self, view: EngineView, exc: BaseException) -> bool:
        """A search failed on `view`: check every file of its workspace's indexes again;
        True when one is damaged, and then the generation is not served again (and the
        follower is told, by the DAMAGED note, to rebuild it). A failure its files do not
        explain fails that search alone."""
        with self._lock:
            generation = self._generation
            served = self._views.get(view.workspace)
            if generation is None or served is None or served.view.searchers is not view.searchers:
                return False  # another search found it out first, or a new view replaced it
            folder = workspace_folder(generation, view.workspace)
            self._checksums.forget(folder)
            damage = self._checksums.damage([folder], view.kinds)
            if damage is None:
                log.warning("the lexical engine failed on a search, its files are whole: %r", exc)
                return False
            self._damaged(generation, damage)
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

    def _refresh(self) -> None:
        """Read the record again when the follower committed or a rebuild swapped
        generations since it was read."""
        stamp = self._stamp()
        if stamp != self._seen:
            watched = self._watched
            self._load()
            # A stamp taken before the load: a commit during it is seen at the next search.
            # Another generation has its own state file to watch.
            self._seen = stamp if self._watched == watched else self._stamp()

    def _stamp(self) -> tuple[Stamp | None, ...]:
        """What changes when the follower commits (its state file is replaced) or a rebuild
        swaps generations (CURRENT is): two stat calls a search, no read."""
        state = None if self._watched is None else self._watched / STATE
        return (file_stamp(self.folder / CURRENT), None if state is None else file_stamp(state))

    def _close(self, problem: str) -> None:
        self._generation, self._state = None, None
        self._indexes.clear()
        self._views.clear()
        self.problem = problem

    def _damaged(self, generation: Path, damage: str) -> None:
        log.warning("the lexical index in %s is damaged: %s", generation, damage)
        why = f"a file of the index is damaged ({damage})"
        report_damage(self.folder, generation, why)
        self._close(why)

    def _load(self) -> None:
        """Read the generation's record (CURRENT and its state); each workspace's files are
        checked when its view is made."""
        generation, problem = check_generation(
            self.folder, self._checksums, lambda state: state.fits(self.database), files=False
        )
        self._watched = generation
        state = None if generation is None else State.read(generation / STATE)
        if problem or generation is None or state is None or state.position is None:
            self._close(problem or MISSING)
            return
        if generation != self._generation:
            self._indexes.clear()
            self._views.clear()
            self._generation = generation
        # A view whose workspace the follower did not write is carried to the new position
        # when next searched (`_carried`); the others are made again from their indexes.
        self._state = state
        self.problem = ""

    def _carried(self, served: _Served) -> _Served | None:
        """The view at the position the follower recorded since it was made, when none of
        its workspace's files changed meanwhile (the writes were other workspaces'); None
        when one did. Making a view again reads every source's statistics: under another
        workspace's writes, each of this one's searches did that."""
        state = self._state
        assert state is not None and state.position is not None
        view = served.view
        if served.made_from is None or self._files_stamp(view.workspace) != served.made_from:
            return None
        return served._replace(view=replace(view, position=state.position))

    def _files_stamp(self, workspace: UUID) -> tuple[Stamp | None, ...]:
        """What changes when the follower commits to (or merges) one of the workspace's
        indexes: Tantivy replaces its meta.json, one stat call a source."""
        state, generation = self._state, self._generation
        assert state is not None and generation is not None
        folder = workspace_folder(generation, workspace)
        return tuple(file_stamp(folder / source / META) for source in state.kinds)

    def _load_workspace(self, workspace: UUID) -> _Served | None:
        """A view of the workspace's indexes as they are now; None when a file of theirs is
        damaged (the generation then serves no more)."""
        state, generation = self._state, self._generation
        assert state is not None and state.position is not None and generation is not None
        if workspace.hex not in state.workspaces:  # nothing of it is in the index yet
            # Made again at each position: its files may be written before the state lists
            # them, and this view read none of them.
            return _Served(EngineView(workspace, state.position, {}, {}, state.kinds), None)
        # Taken first: a commit while the view is made shows as a change at the next search.
        made_from = self._files_stamp(workspace)
        folder = workspace_folder(generation, workspace)
        damage = self._checksums.damage([folder], state.kinds)
        if damage is not None:
            self._damaged(generation, damage)
            return None
        searchers, stats = {}, {}
        try:
            for source in state.kinds:
                held = self._index(folder, source)
                held.index.reload()
                searchers[source] = held.index.searcher()
                found = engine_stats(searchers[source], held.known_term)
                if found is not None:
                    stats[source], held.known_term = found
        except BaseException as exc:
            if not engine_failed(exc):
                raise
            log.warning("cannot read the lexical index in %s: %s", folder, exc)
            self._close("the index cannot be read")
            return None
        return _Served(EngineView(workspace, state.position, searchers, stats, state.kinds),
                       made_from)  # fmt: skip

    def _index(self, folder: Path, source: str) -> _OpenIndex:
        key = (folder, source)
        held = self._indexes.get(key)
        if held is None:
            held = self._indexes[key] = _OpenIndex(open_index(folder, source))
            if len(self._indexes) > OPEN_INDEXES:
                self._indexes.popitem(last=False)
        self._indexes.move_to_end(key)
        return held
