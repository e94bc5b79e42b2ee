"""How far behind the indexer is: backlog, lag, dead letters, and the active model."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from subspace.db.pool import Conn
from subspace.indexer.queue import backlog


@dataclass
class IndexerStatus:
    model: str
    provider: str
    backlog: int  # events whose embeddings are not made yet
    waiting_items: int  # distinct pages, files and mail those events are about
    lag_seconds: float  # age of the oldest event not yet indexed
    retrying: int  # events waiting for a retry after a failure
    dead_letters: int  # items set aside after failing too often
    embeddings: int  # rows under the active model

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def indexer_status(conn: Conn, provider_name: str, model: str) -> IndexerStatus:
    waiting = backlog(conn)
    stored = conn.execute(
        "select count(*) as n from search.embeddings where model = %s", (model,)
    ).fetchone()
    assert stored is not None
    return IndexerStatus(
        model=model,
        provider=provider_name,
        backlog=waiting.events,
        waiting_items=waiting.items,
        lag_seconds=round(waiting.oldest_s, 3),
        retrying=waiting.retrying,
        dead_letters=waiting.dead_letters,
        embeddings=int(stored["n"]),
    )
