"""Where the lexical index stands, for `subspace indexer status`, /readyz and /metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from subspace.config import Settings
from subspace.db.pool import Conn
from subspace.outbox.reading import Behind, behind
from subspace.search.lexical.index.layout import database_folder, database_identity, index_root
from subspace.search.lexical.index.reader import LexicalReader


@dataclass(frozen=True)
class LexicalStatus:
    """Where the lexical index stands: its folder, its documents, how far behind the writes
    it is, and why it cannot serve when it cannot."""

    folder: str
    documents: int | None  # None without a usable index
    behind: Behind | None
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "documents": self.documents,
            "behind_events": None if self.behind is None else self.behind.events,
            "behind_seconds": None if self.behind is None else round(self.behind.oldest_s, 1),
            "problem": self.problem or None,
        }


def lexical_status(
    conn: Conn, settings: Settings, reader: LexicalReader | None = None
) -> LexicalStatus:
    """The index's state as `reader` (by default a new one on the settings' folder) sees it."""
    if reader is None:
        identity = database_identity(conn)
        reader = LexicalReader(database_folder(index_root(settings), identity), identity)
    held, disk_full = reader.held(), reader.disk_full()
    if held is None:
        problem = "; ".join(filter(None, (reader.problem, disk_full)))
        return LexicalStatus(str(reader.folder), None, None, problem)
    position, documents = held
    return LexicalStatus(str(reader.folder), documents, behind(conn, position), disk_full)
