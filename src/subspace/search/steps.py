"""The steps of a search, named once and timed: `SearchResponse.steps` holds each one's
milliseconds, /metrics a histogram per step (`subspace_search_step_duration_seconds`), and
`subspace search --explain` prints them.

The statements of a search go to Postgres in three round trips (db/pipeline.py): a step that
queues a statement does not wait for it, and the wait is counted in the step that first reads
its result (the first trip's, as the legs' preparation reads the query's terms, in `prepare`).
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import TYPE_CHECKING

from subspace.floods import STEP_ASIDE_S

if TYPE_CHECKING:
    from collections.abc import Callable

    from subspace.cancel import Cancel


class SearchStep(StrEnum):
    VALIDATE = "validate"  # the request's limits; the query parsed
    PREPARE = "prepare"  # what the legs need queued: bases, key, backlog, the query's terms
    SCOPE = "scope"  # knowledge bases, kinds, tags and the cursor resolved
    LEGS = "legs"  # the lexical and vector legs run
    FUSE = "fuse"  # fused, the similarity floor, answers below their sources
    GROUP = "group"  # grouped by page and cut to the page asked for
    BROWSE = "browse"  # without a query: the items matching the filters
    HYDRATE = "hydrate"  # the rows shown queued: titles, passages, highlights
    EXPLAIN = "explain"  # with explain: why each row ranked where it did
    CURSOR = "cursor"  # the next page's cursor
    COMMIT = "commit"  # the rows read back and the transaction ended
    ASIDE = "aside"  # a flood's search waiting for other workspaces' requests (floods.py)


class StepClock:
    """Times the steps of one search, one after another: `done(step)` gives the time since
    the previous step ended to `step`, and raises CallerGone once `cancel` is set (the search
    stops between steps when its caller has gone). A flood's search steps aside between steps
    while other workspaces' requests run in its process (`step_aside(most_s)`, which answers
    the seconds it waited; floods.Precedence), STEP_ASIDE_S in all, timed as `aside`."""

    def __init__(
        self,
        cancel: Cancel | None = None,
        step_aside: Callable[[float], float] | None = None,
    ) -> None:
        self.started = self._last = time.perf_counter()
        self.ms: dict[str, float] = {}
        self.cancel = cancel
        self.step_aside = step_aside
        self._aside_left = STEP_ASIDE_S

    def done(self, step: SearchStep) -> None:
        if self.cancel is not None:
            self.cancel.check()
        self._time(step)
        if self.step_aside is not None and self._aside_left > 0:
            waited = self.step_aside(self._aside_left)
            if waited:
                self._aside_left -= waited
                self._time(SearchStep.ASIDE)

    def _time(self, step: SearchStep) -> None:
        now = time.perf_counter()
        self.ms[step.value] = round(self.ms.get(step.value, 0.0) + (now - self._last) * 1000, 3)
        self._last = now
