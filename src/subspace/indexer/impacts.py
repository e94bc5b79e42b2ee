"""Keeping the postings' impacts tight: recompute a source's impacts when its average
document length has drifted from the basis they were computed with.

Rankings never depend on this (the exact top-k bounds unseen documents by the drift, see
migration 0013); a stale basis only makes a search read more postings before it can stop.
"""

from __future__ import annotations

import logging
from uuid import UUID

from subspace.db.pool import Conn

log = logging.getLogger(__name__)

# How far (as a ratio either way) a source's average length may move from its basis before
# its impacts are recomputed: 1.25 lets a search read at most a quarter deeper than needed
# for the drift, and a collection that doubled is refreshed about three times on the way.
MAX_DRIFT = 1.25

_DRIFTED = """
select s.workspace_id, s.source from search.source_stats s
join search.impact_basis b on b.workspace_id = s.workspace_id and b.source = s.source
where s.ndocs > 0 and greatest(s.total_len::float8 / s.ndocs, 1) not between
    b.avgdl / %(drift)s and b.avgdl * %(drift)s
order by 1, 2
"""


def refresh_drifted_impacts(conn: Conn, *, drift: float = MAX_DRIFT) -> list[tuple[UUID, str]]:
    """Recompute the impacts of every (workspace, source) whose average length left the
    basis by more than `drift`, each in its own transaction; return those refreshed."""
    refreshed = []
    for row in conn.execute(_DRIFTED, {"drift": drift}).fetchall():
        with conn.transaction():
            conn.execute(
                "select search.refresh_impacts(%s, %s)", (row["workspace_id"], row["source"])
            )
        refreshed.append((row["workspace_id"], row["source"]))
        log.info("refreshed %s impacts of workspace %s", row["source"], row["workspace_id"])
    return refreshed
