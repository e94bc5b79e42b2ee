"""How far behind the indexer is: backlog, lag, dead letters, the active model, and the
progress of a heal (after a change of model: texts embedded of those wanted, rate, ETA)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.indexer.queue import backlog
from subspace.progress import duration

RATE_WINDOW_S = 60  # the rate is the texts embedded over this many seconds

# The texts the active model should have a vector for, counted as the sweep finds them
# (indexer/sweep.py): page titles and non-blank bullets of live pages, chunks of ready files,
# mail with a subject or a body; of one workspace, or of all when `ws` is null.
_ONE = "(%(ws)s::uuid is null or {}.workspace_id = %(ws)s)"
_WANTED = rf"""
select (select count(*) from kb.pages p
        where p.deleted_at is null and p.title ~ '\S' and {_ONE.format("p")})
    + (select count(*) from kb.nodes n join kb.pages p
       on p.workspace_id = n.workspace_id and p.id = n.page_id
       where p.deleted_at is null and n.text ~ '\S' and {_ONE.format("p")})
    + (select count(*) from kb.files f join search.file_chunks c
       on c.workspace_id = f.workspace_id and c.file_id = f.id
       where f.deleted_at is null and f.status = 'ready' and c.text ~ '\S' and {_ONE.format("f")})
    + (select count(*) from kb.mail m
       where m.deleted_at is null and (m.subject ~ '\S' or m.body_text ~ '\S')
       and {_ONE.format("m")}) as wanted
"""


@dataclass(frozen=True)
class EmbeddingProgress:
    """How many texts have a vector of the model, of those that should, and how fast the
    rest are coming."""

    model: str
    wanted: int  # texts that should have a vector of the model
    embedded: int  # vectors of the model stored (orphans a sweep will prune included)
    rate_per_s: float  # texts embedded a second, over the last RATE_WINDOW_S
    eta_seconds: float | None  # until every wanted text has its vector, at that rate

    @property
    def line(self) -> str:
        """For people: '2,310 of 21,004 texts embedded with M (11 %), 24.5 a second, about
        12 min left', or '' when none is missing."""
        if self.embedded >= self.wanted:
            return ""
        line = (
            f"{self.embedded:,} of {self.wanted:,} texts embedded with {self.model} "
            f"({self.embedded / self.wanted:.0%})"
        )
        if self.rate_per_s:
            line += f", {self.rate_per_s:,.1f} a second"
        if self.eta_seconds is not None:
            line += f", about {duration(self.eta_seconds)} left"
        return line


def embedding_progress(
    conn: Conn, model: str, workspace_id: UUID | None = None
) -> EmbeddingProgress:
    """Where `model`'s vectors stand, over every workspace or over one."""
    stored = conn.execute(
        "select count(*) as n, "
        f"count(*) filter (where updated_at > now() - interval '{RATE_WINDOW_S} seconds') "
        f"as recent from search.embeddings e where model = %(model)s and {_ONE.format('e')}",
        {"model": model, "ws": workspace_id},
    ).fetchone()
    counted = conn.execute(_WANTED, {"ws": workspace_id}).fetchone()
    assert stored is not None and counted is not None
    wanted, embedded = int(counted["wanted"]), int(stored["n"])
    rate = int(stored["recent"]) / RATE_WINDOW_S
    missing = max(0, wanted - embedded)
    return EmbeddingProgress(
        model=model,
        wanted=wanted,
        embedded=embedded,
        rate_per_s=round(rate, 2),
        eta_seconds=round(missing / rate, 1) if missing and rate else None,
    )


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
    wanted: int  # texts the active model should have a vector for
    healing: int  # items queued because they lack vectors of the active model
    rate_per_s: float  # texts embedded a second, over the last RATE_WINDOW_S
    eta_seconds: float | None  # until every wanted text has its vector, at that rate
    progress: str  # the same, in a sentence ('' when no text lacks its vector)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def indexer_status(conn: Conn, provider_name: str, model: str) -> IndexerStatus:
    waiting = backlog(conn)
    progress = embedding_progress(conn, model)
    return IndexerStatus(
        model=model,
        provider=provider_name,
        backlog=waiting.events,
        waiting_items=waiting.items,
        lag_seconds=round(waiting.oldest_s, 3),
        retrying=waiting.retrying,
        dead_letters=waiting.dead_letters,
        embeddings=progress.embedded,
        wanted=progress.wanted,
        healing=waiting.healing,
        rate_per_s=progress.rate_per_s,
        eta_seconds=progress.eta_seconds,
        progress=progress.line,
    )
