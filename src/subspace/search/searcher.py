"""What a search runs with besides the caller's context: the state searches share, the
embedding provider, and whom each search is reported to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from subspace.search.shared import SearchRuntime

if TYPE_CHECKING:
    from subspace.cancel import Cancel

    # Annotations only: the processes that open a database without searching (the
    # extraction children among them, under a memory cap) need not load numpy for them.
    from subspace.providers.base import EmbeddingProvider
    from subspace.search.request import SearchResponse


@dataclass(frozen=True)
class Searcher:
    """One process's way to search: every surface builds one and hands it to `search()`.

    >>> searcher = database.searcher(provider)
    >>> search(cx, searcher, SearchRequest(query="checkout outage")).rows[0].title
    'Checkout outage'
    """

    # The vector leg's threads, the bases' sizes seen, the query embeddings and the lexical
    # index's reader: the Database's, so every search of the process shares them.
    runtime: SearchRuntime
    # None: no embedding provider is configured, and searches run the lexical leg alone.
    provider: EmbeddingProvider | None
    # Called with every search's response: the server counts searches in its metrics, from
    # whichever surface they come.
    observer: Callable[[SearchResponse], None] | None = None
    # An answer run's searches leave out the bullets runs asked with or wrote: they are no
    # sources, and a page asked the same question often would otherwise fill the top hits
    # with its own questions and answers (answers/sources.py).
    sources_only: bool = False
    # Set when the caller has gone (an aborted palette request): the search stops.
    cancel: Cancel | None = None

    def observed_by(self, observer: Callable[[SearchResponse], None] | None) -> Searcher:
        """The same searcher, reporting each search to `observer`."""
        return replace(self, observer=observer)

    def cancelled_by(self, cancel: Cancel | None) -> Searcher:
        """The same searcher, stopping its search when `cancel` is set."""
        return replace(self, cancel=cancel)

    def for_answers(self) -> Searcher:
        """The same searcher, finding sources only (for an answer run)."""
        return replace(self, sources_only=True)
