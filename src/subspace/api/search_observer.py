"""What a request searches with: the app's provider and shared search state, and an observer
that counts every search the request runs, whichever surface ran it (/api/search, the
Sim-compatible endpoint, /api/tools, /mcp), in the app's metrics and notes it for the
request's log line."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from starlette.requests import Request

from subspace.api.state import database
from subspace.search.searcher import Searcher

if TYPE_CHECKING:
    from subspace.search.request import SearchResponse


class SearchCounter(Protocol):
    """What counts searches: the app's metrics (api/metrics.py)."""

    def observe_search(self, response: SearchResponse) -> None: ...


def search_observer(request: Request) -> Callable[[SearchResponse], None]:
    """What `search()` calls with each response it gives for `request`."""

    def observe(response: SearchResponse) -> None:
        metrics: SearchCounter | None = getattr(request.app.state, "metrics", None)
        if metrics is not None:
            metrics.observe_search(response)
        noted: dict[str, object] = {
            "mode": response.mode,
            "rows": len(response.rows),
            "took_ms": response.took_ms,
            "legs": {
                name: {
                    "ran": leg.ran,
                    "ms": leg.ms,
                    "candidates": leg.candidates,
                    "error": leg.error,
                }
                for name, leg in response.legs.items()
            },
            "degraded": response.degraded,
        }
        if request.app.state.settings.log_level == "debug":
            # What people search for is theirs: it reaches the logs only when asked for.
            noted["query"] = response.query
        request.state.search = noted

    return observe


def request_searcher(request: Request) -> Searcher:
    """The searcher for `request`'s searches, reporting each to `search_observer(request)`."""
    return (
        database(request).searcher(request.app.state.provider).observed_by(search_observer(request))
    )
