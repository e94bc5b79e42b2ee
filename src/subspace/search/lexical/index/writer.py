"""Writing the lexical index: the folder's one-writer lock, and the writers of a generation."""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import tantivy

from subspace.search.lexical.index.layout import (
    FORMAT,
    LOCK,
    STATE,
    WRITER_HEAP_BYTES,
    IndexDocument,
    State,
    create_indexes,
    open_index,
    source_kinds,
    workspace_folder,
)

OPEN_WRITERS = 12  # committed writers kept open: a burst of writes in a few workspaces


class FollowerLock:
    """The folder's one-writer lock: an flock the kernel releases when the process dies."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._handle: IO[str] | None = None

    def acquire(self) -> bool:
        """Take it without waiting; True when this process holds it. A lock whose file was
        removed with its folder is taken again on the new file: another process could take
        that one."""
        import fcntl

        if self._handle is not None:
            try:
                same = os.stat(self.folder / LOCK).st_ino == os.fstat(self._handle.fileno()).st_ino
            except OSError:
                same = False
            if same:
                return True
            self.release()
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = (self.folder / LOCK).open("a+")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._handle = handle
        return True

    def release(self) -> None:
        """Safe to call twice."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class Writers:
    """The writers of one generation: one per workspace and source, opened when a document
    of theirs is written or deleted, and closed, the least recently used first, once more
    than OPEN_WRITERS stand committed (each holds its heap and a thread)."""

    def __init__(self, generation: Path, workspaces: dict[str, int] | None = None) -> None:
        self.generation = generation
        self.kinds = source_kinds()
        self.workspaces = dict(workspaces or {})  # as State.workspaces: hex -> documents
        self._open: OrderedDict[tuple[UUID, str], tuple[tantivy.Index, Any]] = OrderedDict()
        self._dirty: set[tuple[UUID, str]] = set()

    def writer(self, workspace: UUID, source: str) -> Any:
        """The writer of `source` in `workspace`, its folder made with every source's index
        the first time the workspace is written."""
        key = (workspace, source)
        entry = self._open.get(key)
        if entry is None:
            folder = workspace_folder(self.generation, workspace)
            if workspace.hex not in self.workspaces:
                create_indexes(folder, list(self.kinds))
                self.workspaces[workspace.hex] = 0
            index = open_index(folder, source)
            entry = (index, self.open_writer(index))
            self._open[key] = entry
        self._open.move_to_end(key)
        self._dirty.add(key)
        return entry[1]

    @staticmethod
    def open_writer(index: tantivy.Index) -> Any:
        """A writer of `index` (a seam for the crash tests)."""
        return index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)

    def add(self, document: IndexDocument) -> None:
        kinds = self.kinds[document.source]
        self.writer(document.workspace, document.source).add_document(document.to_tantivy(kinds))

    def delete(self, workspace: UUID, source: str, field: str, value: str) -> None:
        """Delete the documents of `source` in `workspace` whose `field` holds `value`."""
        if workspace.hex in self.workspaces:  # a workspace without a folder holds nothing
            self.writer(workspace, source).delete_documents_by_term(field, value)

    def commit(self, position: str | None, database: str, lsn: str | None = None) -> None:
        """Commit every writer written, count the documents of their workspaces, then record
        `position` and the WAL position `lsn` it was taken at (position None: leave the state
        as it is): never before their documents."""
        touched = {workspace for workspace, _ in self._dirty}
        for key in sorted(self._dirty):
            self._open[key][1].commit()
        self._dirty.clear()
        for workspace in touched:
            self.workspaces[workspace.hex] = self._documents(workspace)
        if position is not None:
            state = State(FORMAT, database, self.kinds, position, self.workspaces, lsn)
            state.write(self.generation / STATE)
        while len(self._open) > OPEN_WRITERS:
            _, (_, writer) = self._open.popitem(last=False)
            writer.wait_merging_threads()

    def _documents(self, workspace: UUID) -> int:
        """The live documents of the workspace, every source's, as its indexes hold them now."""
        folder = workspace_folder(self.generation, workspace)
        total = 0
        for source in self.kinds:
            entry = self._open.get((workspace, source))
            index = entry[0] if entry is not None else open_index(folder, source)
            index.reload()
            total += int(index.searcher().num_docs)
        return total

    def close(self) -> None:
        """Drop what was written since the last commit and close every writer."""
        for _, writer in self._open.values():
            writer.rollback()
            writer.wait_merging_threads()
        self._open.clear()
        self._dirty.clear()
