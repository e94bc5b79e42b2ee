"""Small helpers for search tests: run a search, list what came back."""

from __future__ import annotations

from typing import Any

from subspace.context import Context
from subspace.indexer.consumer import Indexer
from subspace.providers.base import EmbeddingProvider
from subspace.providers.fake import FakeProvider
from subspace.runtime import Database
from subspace.search import kinds as registry
from subspace.search.service import SearchRequest, SearchResponse, search


def index(database: Database, cx: Context, provider: EmbeddingProvider | None = None) -> None:
    """Embed everything written so far (as the running indexer would)."""
    Indexer(database, cx.settings, provider or FakeProvider()).drain()


def run(cx: Context, query: str, provider: EmbeddingProvider | None = None,
        **options: Any) -> SearchResponse:  # fmt: skip
    return search(cx, provider or FakeProvider(), SearchRequest(query=query, **options))


def ids(response: SearchResponse) -> list[Any]:
    return [row.id for row in response.rows]


def source_documents_sql() -> str:
    """SQL listing every document of every BM25 source the registry declares, as the
    statistics triggers count them: workspace_id, source, tsv and len."""
    return " union all ".join(
        f"select workspace_id, '{source}' as source, {spec.tsv} as tsv, {spec.length} as len "
        f"from {spec.table}"
        for source in registry.sources()
        for spec in registry.of_source(source)[:1]
    )
