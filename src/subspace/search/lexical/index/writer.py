"""Writing the lexical index: the folder's one-writer lock, and the writers of a generation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

from subspace.search.lexical.index.layout import (
    FORMAT,
    LOCK,
    STATE,
    WRITER_HEAP_BYTES,
    State,
    open_index,
    source_kinds,
)


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
    """The open writers of one generation, one per source."""

    def __init__(self, generation: Path, *, create: bool = False) -> None:
        self.generation = generation
        self.kinds = source_kinds()
        self.indexes = {s: open_index(generation, s, create=create) for s in self.kinds}
        self.writers = {
            s: index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
            for s, index in self.indexes.items()
        }

    def add(self, document: Any) -> None:
        self.writers[document.source].add_document(document.to_tantivy(self.kinds[document.source]))

    def commit(self, sources: set[str], position: str, database: str) -> None:
        """Commit the sources written, then record `position`: never before their documents."""
        for source in sources:
            self.writers[source].commit()
        State(FORMAT, database, self.kinds, position).write(self.generation / STATE)

    def close(self) -> None:
        for writer in self.writers.values():
            writer.rollback()  # drops what was added since the last commit
            writer.wait_merging_threads()
        self.writers = {}
