"""Each embedding model has its own HNSW index at its own width, and the vector leg uses it:
the same neighbours and distances as an exact scan of the full 1,536-wide vectors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import psycopg
import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.db.migrate import migrate
from subspace.db.pool import Conn
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.reconcile import reconcile
from subspace.indexer.reindex import reembed
from subspace.ingest.outline import OutlineItem
from subspace.providers.base import EmbeddingProvider, Vectors
from subspace.providers.fake import FakeProvider, trigram_vector
from subspace.search import vector
from subspace.search.filters import resolve_scope
from subspace.search.vector import embed_query
from tests.search_helpers import vector_hits

WORDS = ["harbour", "ferry", "timetable", "lighthouse", "anchor", "tide", "gull", "pier"]


class WideProvider:
    """Another model at another width (384, as all-MiniLM-L6-v2), without a real model."""

    name = "fake"
    model = "fake-trigram-384"
    dimensions = 384

    def embed(self, texts: Sequence[str]) -> Vectors:
        # The last 128 numbers hash the reversed text, so the width is used to its end.
        rows = [np.concatenate([trigram_vector(t), trigram_vector(t[::-1])[:128]]) for t in texts]
        return np.stack(rows).astype(np.float32)


PROVIDERS: list[EmbeddingProvider] = [FakeProvider(), WideProvider()]


def write_corpus(cx: Context, bullets: int = 240) -> None:
    """Bullets of three words each: enough rows that a lowered EXACT_SCAN_ROWS walks the index."""
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(WORDS, size=3)) + f" {n}" for n in range(bullets)]
    commands.create_page_from_outline(cx, "Harbour log", [OutlineItem(t) for t in texts])


def index_name(conn: Conn, model: str) -> str:
    row = conn.execute("select search.vector_index_name(%s) as name", (model,)).fetchone()
    assert row is not None
    return str(row["name"])


def hnsw_indexes(conn: Conn) -> dict[str, str]:
    """name -> definition of every HNSW index on search.embeddings."""
    rows = conn.execute(
        "select indexname, indexdef from pg_indexes where schemaname = 'search' "
        "and tablename = 'embeddings' and indexdef like '%%USING hnsw%%'"
    ).fetchall()
    return {r["indexname"]: r["indexdef"] for r in rows}


def leg(
    database: Database,
    conn: Conn,
    cx: Context,
    provider: EmbeddingProvider,
    text: str,
    cap: int = 10,
) -> tuple[list[tuple[str, float]], str]:
    scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                          kinds=None, tags=None, max_knowledge_bases=50)  # fmt: skip
    query = embed_query(database.search_runtime, provider, text, timeout_s=5)
    hits, plan = vector_hits(conn, scope, query, provider, cap=cap)
    return [(h.ref, h.score) for h in hits], plan


def full_width_scan(
    database: Database, conn: Conn, cx: Context, provider: EmbeddingProvider, text: str, cap: int
) -> list[tuple[str, float]]:
    """The nearest rows by the whole stored vectors, as the leg ranked them before."""
    query = embed_query(database.search_runtime, provider, text, timeout_s=5)
    rows = conn.execute(
        "select ref, 1 - (vec <=> %s) as score from search.embeddings "
        "where workspace_id = %s and model = %s order by vec <=> %s, ref limit %s",
        (query, cx.actor.workspace_id, provider.model, query, cap),
    ).fetchall()
    return [(r["ref"], float(r["score"])) for r in rows]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: str(p.dimensions))
def test_the_leg_walks_its_models_index_at_its_width(
    database: Database, cx: Context, provider: EmbeddingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_corpus(cx)
    EmbeddingsFollower(database, cx.settings, provider).drain()
    with database.pool.connection() as conn:
        conn.execute("analyze search.embeddings")  # as autovacuum would have by now
    d = provider.dimensions
    with cx.transaction() as conn:
        name = index_name(conn, provider.model)
        definition = hnsw_indexes(conn)[name]
        assert f"(subvector(vec, 1, {d}))::halfvec({d})" in definition
        assert f"WHERE (model = '{provider.model}'::text)" in definition

        monkeypatch.setattr(vector, "EXACT_SCAN_ROWS", 50)  # the corpus is "large"
        conn.execute("set local plan_cache_mode = force_custom_plan")
        # Past psycopg's prepare threshold (5) the statements run prepared, as on a server.
        for _ in range(7):
            by_index, plan = leg(database, conn, cx, provider, "ferry lighthouse")
            assert plan == "index"
        scans = conn.execute(
            "select pg_stat_get_xact_numscans(format('search.%%I', %s::text)::regclass) as n",
            (name,),
        ).fetchone()
        assert scans is not None
        assert scans["n"] >= 7

        scope = resolve_scope(conn, cx.actor.workspace_id, cx.actor.user_id, kb_ids=None,
                              kinds=None, tags=None, max_knowledge_bases=50)  # fmt: skip
        query = vector.query_at_width(
            embed_query(database.search_runtime, provider, "ferry", timeout_s=5), d
        )
        where = vector._scope_sql(scope, provider.model, "", vector.Fragment("true", {}))
        sql = vector._index_sql(where, query, 10, d)
        plan_text = "\n".join(
            str(next(iter(r.values()))) for r in conn.execute("explain " + sql.sql, sql.params)
        )
        assert f"Index Scan using {name}" in plan_text

        monkeypatch.setattr(vector, "EXACT_SCAN_ROWS", 2_000)
        exact, plan = leg(database, conn, cx, provider, "ferry lighthouse")
        assert plan == "exact"
        reference = full_width_scan(database, conn, cx, provider, "ferry lighthouse", 10)
    # Same neighbours, same order, same distances: the padding adds nothing to a cosine.
    assert [ref for ref, _ in by_index] == [ref for ref, _ in reference]
    assert [ref for ref, _ in exact] == [ref for ref, _ in reference]
    assert np.allclose([s for _, s in by_index], [s for _, s in reference], atol=1e-6)
    assert np.allclose([s for _, s in exact], [s for _, s in reference], atol=1e-6)


def test_a_model_switch_builds_the_new_models_index_and_reindex_keeps_one_each(
    database: Database, cx: Context
) -> None:
    write_corpus(cx, bullets=30)
    fake, wide = PROVIDERS
    EmbeddingsFollower(database, cx.settings, fake).drain()
    with database.pool.connection() as conn:
        fake_index = index_name(conn, fake.model)
        wide_index = index_name(conn, wide.model)
        assert set(hnsw_indexes(conn)) == {fake_index}
    # The new model's first write builds its index; the old model's stays with its vectors.
    keep = replace(cx.settings, index_keep_other_models=True)
    EmbeddingsFollower(database, keep, wide).sweep()
    with database.pool.connection() as conn:
        assert set(hnsw_indexes(conn)) == {fake_index, wide_index}
        widths = conn.execute("select model, dimensions from public.vector_models").fetchall()
        assert {r["model"]: r["dimensions"] for r in widths} == {fake.model: 256, wide.model: 384}

    reembed(database, cx.settings, wide, None, progress=lambda _: None)
    with database.pool.connection() as conn:
        assert set(hnsw_indexes(conn)) == {fake_index, wide_index}
        # A model whose vectors are gone loses its index at the next reindex.
        conn.execute("delete from search.embeddings where model = %s", (fake.model,))
    reembed(database, cx.settings, wide, None, progress=lambda _: None)
    with database.pool.connection() as conn:
        assert set(hnsw_indexes(conn)) == {wide_index}
        with conn.transaction():
            hits, plan = leg(database, conn, cx, wide, "tide")
        assert hits
        assert plan == "exact"


def test_a_model_is_never_narrowed_and_widening_rebuilds_its_index(
    database: Database, cx: Context
) -> None:
    write_corpus(cx, bullets=3)
    EmbeddingsFollower(database, cx.settings, FakeProvider()).drain()
    with database.pool.connection() as conn:
        name = index_name(conn, FakeProvider.model)
        with pytest.raises(psycopg.errors.RaiseException, match="registered with 256"):
            conn.execute("select search.register_vector_model(%s, 128)", (FakeProvider.model,))
        conn.rollback()
        conn.execute("select search.register_vector_model(%s, 300)", (FakeProvider.model,))
        assert "halfvec(300)" in hnsw_indexes(conn)[name]


def test_an_existing_database_gets_each_models_index_at_its_inferred_width(
    database: Database, cx: Context, db_dsn: str
) -> None:
    write_corpus(cx, bullets=20)
    keep = replace(cx.settings, index_keep_other_models=True)
    for provider in PROVIDERS:
        EmbeddingsFollower(database, keep, provider).sweep()
    with database.pool.connection() as conn:
        # The database as migration 0014 left it: one full-width index, nothing per model.
        for model in (p.model for p in PROVIDERS):
            conn.execute("select search.drop_vector_index(%s)", (model,))
        conn.execute(
            "drop table public.vector_models; drop function search.register_vector_model, "
            "search.build_vector_indexes, search.build_vector_index, "
            "search.drop_vector_index, search.vector_index_name; "
            "create index embeddings_vec on search.embeddings using hnsw (vec halfvec_cosine_ops); "
            "delete from public.schema_migrations where version = 15"
        )
    migrate(db_dsn)
    with database.pool.connection() as conn:
        assert conn.execute("select to_regclass('search.embeddings_vec') as i").fetchone() == {
            "i": None
        }
        widths = conn.execute("select model, dimensions from public.vector_models").fetchall()
        inferred = {r["model"]: r["dimensions"] for r in widths}
        # Sparse vectors may end in zeros everywhere: never wider than the model, and close.
        for provider in PROVIDERS:
            assert provider.dimensions - 8 <= inferred[provider.model] <= provider.dimensions
        expected = {index_name(conn, p.model) for p in PROVIDERS}
        assert set(hnsw_indexes(conn)) == expected
        # The next write of each model states its width, which widens one inferred short.
        for provider in PROVIDERS:
            with conn.transaction():
                reconcile(conn, provider, [])
        definitions = hnsw_indexes(conn)
        for provider in PROVIDERS:
            d = provider.dimensions
            assert f"halfvec({d})" in definitions[index_name(conn, provider.model)]
