"""Small helpers for search tests: run a search, list what came back."""

from __future__ import annotations

from typing import Any

from pgvector import HalfVector

from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.providers.base import EmbeddingProvider
from subspace.providers.fake import FakeProvider
from subspace.search import registry
from subspace.search.filters import Scope
from subspace.search.fusion import Hit
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.lexical.index.layout import database_identity, index_root
from subspace.search.lexical.leg import (
    LexicalInputs,
    prepare_lexical,
    queue_lexical_leg,
)
from subspace.search.lexical.terms import TsQueries
from subspace.search.request import SearchRequest, SearchResponse
from subspace.search.service import search
from subspace.search.vector import VectorLeg, queue_vector_leg


def index(database: Database, cx: Context, provider: EmbeddingProvider | None = None) -> None:
    """Embed everything written so far and bring the lexical index up to it (as the running
    indexer and follower would)."""
    embed(database, cx, provider)
    follow(database, cx)


def embed(database: Database, cx: Context, provider: EmbeddingProvider | None = None) -> None:
    """Embed everything written so far (as the running indexer would)."""
    EmbeddingsFollower(database, cx.settings, provider or FakeProvider()).drain()


def follow(database: Database, cx: Context) -> None:
    """One round of the lexical follower: the index holds every write so far."""
    follower = LexicalFollower(database, cx.settings)
    try:
        follower.run_once()
    finally:
        follower.close()


def run(database: Database, cx: Context, query: str,
        provider: EmbeddingProvider | None = None, **options: Any) -> SearchResponse:  # fmt: skip
    """Search as a surface would, with `provider` (the fake one when none is given)."""
    searcher = database.searcher(provider or FakeProvider())
    return search(cx, searcher, SearchRequest(query=query, **options))


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


def lexical_hits(
    database: Database, cx: Context, scope: Scope, tsq: TsQueries, *, cap: int,
    ranker: str = "bm25", engine: bool = True, current: bool = True,
) -> list[Hit]:  # fmt: skip
    """The lexical leg's hits for `scope` and `tsq`: from the index (brought up to every
    write first when `current`, else with the writes since as its delta), or ranked in
    Postgres as without one."""
    with database.pool.connection() as conn:
        if not engine:
            unindexed = LexicalInputs(None, "no index")
            return (
                queue_lexical_leg(conn, scope, tsq, unindexed, cap=cap, ranker=ranker).result().hits
            )
        if current:
            follow(database, cx)
        reader = database.search_runtime.lexical_reader(
            index_root(cx.settings), lambda: database_identity(conn)
        )
        inputs = prepare_lexical(conn, reader, cx.settings, scope.workspace_id, scope.user_id,
                                 ranker=ranker)  # fmt: skip
        assert ranker != "bm25" or inputs.view is not None, reader.problem
        return queue_lexical_leg(conn, scope, tsq, inputs, cap=cap, ranker=ranker).result().hits


def vector_hits(
    conn: Conn, scope: Scope, query: HalfVector, provider: EmbeddingProvider, *, cap: int
) -> tuple[list[Hit], str]:
    """The vector leg's hits for `scope` (one walk of twice `cap`, as a one-base search) and
    the plan it used."""
    leg = VectorLeg(scope, query, provider.model, provider.dimensions, cap, 2 * cap)
    return queue_vector_leg(conn, leg).result()
