"""Small helpers for search tests: run a search, list what came back."""

from __future__ import annotations

from typing import Any

from subspace.context import Context
from subspace.indexer.consumer import Indexer
from subspace.providers.base import EmbeddingProvider
from subspace.providers.fake import FakeProvider
from subspace.runtime import Database
from subspace.search.service import SearchRequest, SearchResponse, search


def index(database: Database, cx: Context, provider: EmbeddingProvider | None = None) -> None:
    """Embed everything written so far (as the running indexer would)."""
    Indexer(database, cx.settings, provider or FakeProvider()).drain()


def run(cx: Context, query: str, provider: EmbeddingProvider | None = None,
        **options: Any) -> SearchResponse:  # fmt: skip
    return search(cx, provider or FakeProvider(), SearchRequest(query=query, **options))


def ids(response: SearchResponse) -> list[Any]:
    return [row.id for row in response.rows]
