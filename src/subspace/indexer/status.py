"""How far behind the indexer is: backlog, lag, dead letters, and the active model."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from subspace.db.pool import Conn
from subspace.search import registry


@dataclass
class IndexerStatus:
    model: str
    provider: str
    backlog: int  # events not yet indexed
    waiting_items: int  # distinct pages, files and mail those events are about
    lag_seconds: float  # age of the oldest event not yet indexed
    retrying: int  # events waiting for a retry after a failure
    dead_letters: int
    embeddings: int  # rows under the active model

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def indexer_status(conn: Conn, provider_name: str, model: str) -> IndexerStatus:
    row = conn.execute(
        "select count(*) as backlog, "
        "coalesce(extract(epoch from now() - min(o.created_at)), 0) as lag, "
        "count(*) filter (where o.attempts > 0) as retrying, "
        f"count(distinct {registry.event_item_sql()}) as waiting "
        "from kb.outbox o where o.indexed_at is null",
        {},
    ).fetchone()
    dead = conn.execute("select count(*) as n from search.dead_letters").fetchone()
    stored = conn.execute(
        "select count(*) as n from search.embeddings where model = %s", (model,)
    ).fetchone()
    assert row is not None and dead is not None and stored is not None
    return IndexerStatus(
        model=model,
        provider=provider_name,
        backlog=int(row["backlog"]),
        waiting_items=int(row["waiting"]),
        lag_seconds=round(float(row["lag"]), 3),
        retrying=int(row["retrying"]),
        dead_letters=int(dead["n"]),
        embeddings=int(stored["n"]),
    )
