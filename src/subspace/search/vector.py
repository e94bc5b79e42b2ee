"""The vector leg: cosine nearest neighbours over search.embeddings, filtered and complete.

Filters (model, kinds, knowledge bases, visibility) are applied while the HNSW index is
walked, with pgvector's iterative scan so a selective filter still fills the window. When the
filtered set is small, an exact scan over it is both faster and exact.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from pgvector import HalfVector

from subspace.db.pool import Conn
from subspace.providers.base import EmbeddingProvider, ProviderError, checked_vectors
from subspace.search.filters import Scope, embedding_not_excluded, embedding_visible
from subspace.search.fusion import Hit

EXACT_SCAN_ROWS = 2_000  # below this many candidate rows an exact scan beats the index
MAX_SCAN_TUPLES = 50_000  # how far an iterative scan may walk before it gives up
MAX_DISTANCE = 1.0  # cosine distance 1 means orthogonal: no relation worth ranking
QUERY_CACHE_SIZE = 512  # recent query embeddings kept, for a palette typing and retyping

# Query embeddings run on their own small pool so a hung provider cannot tie up requests.
_embedder_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embed")
_cache: OrderedDict[tuple[str, str], HalfVector] = OrderedDict()
_cache_lock = threading.Lock()


class EmbeddingUnavailable(Exception):
    """The query could not be embedded in time; the search goes on without the vector leg."""


def embed_query(provider: EmbeddingProvider, text: str, *, timeout_s: float) -> HalfVector:
    """The query's vector, from the cache or the provider within `timeout_s`."""
    key = (provider.model, text)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    future = _embedder_pool.submit(provider.embed, [text])
    try:
        raw = future.result(timeout=timeout_s)
    except FutureTimeout:
        future.cancel()
        raise EmbeddingUnavailable(f"timeout after {timeout_s:g} s") from None
    except ProviderError as exc:
        raise EmbeddingUnavailable(str(exc)) from None
    except Exception as exc:  # any provider failure degrades the search, never breaks it
        raise EmbeddingUnavailable(f"{type(exc).__name__}: {exc}") from None
    try:
        vector = checked_vectors(raw, count=1, model=provider.model, dimensions=provider.dimensions)
    except ProviderError as exc:
        raise EmbeddingUnavailable(str(exc)) from None
    half = HalfVector(vector[0])
    with _cache_lock:
        _cache[key] = half
        while len(_cache) > QUERY_CACHE_SIZE:
            _cache.popitem(last=False)
    return half


def _scope_sql(scope: Scope, excluded: str) -> str:
    kinds = ", ".join(f"'{k}'" for k in sorted(scope.kinds))
    sql = (
        f"e.workspace_id = %(ws)s and e.model = %(model)s and e.kind in ({kinds}) "
        f"and e.kb_id = %(kb)s and {embedding_visible(scope)}"
    )
    return sql + f" and {embedding_not_excluded()}" if excluded else sql


def vector_leg(
    conn: Conn, scope: Scope, query: HalfVector, *, model: str, cap: int, excluded: str = ""
) -> tuple[list[Hit], str]:
    """The leg's hits, nearest first, at most `cap` per knowledge base; and the plan used
    ("index" or "exact")."""
    if not scope.kb_ids or not scope.kinds:
        return [], "none"
    where = _scope_sql(scope, excluded)
    params: dict[str, Any] = scope.params() | {
        "model": model,
        "q": query,
        "cap": cap,
        "excluded": excluded,
    }
    # Count the candidates (cheaply, up to the threshold) to choose the plan.
    small = True
    for kb_id in scope.kb_ids:
        row = conn.execute(
            "select count(*) as n from (select 1 from search.embeddings e "
            f"where e.workspace_id = %(ws)s and e.model = %(model)s and e.kb_id = %(kb)s "
            f"limit {EXACT_SCAN_ROWS}) c",
            params | {"kb": kb_id},
        ).fetchone()
        if row is not None and row["n"] >= EXACT_SCAN_ROWS:
            small = False
            break
    hits: list[tuple[float, Hit]] = []
    if not small:
        # Scoped to the caller's transaction: the search runs in one.
        conn.execute(f"set local hnsw.ef_search = {max(40, min(1000, cap))}")
        conn.execute("set local hnsw.iterative_scan = relaxed_order")
        conn.execute(f"set local hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}")
    for kb_id in scope.kb_ids:
        if small:
            # A materialized set cannot use the vector index: the scan is exact.
            sql = (
                "with candidates as materialized (select e.kind, e.ref, e.kb_id, e.item_id, "
                f"e.target_id, e.vec from search.embeddings e where {where}) "
                "select kind, ref, kb_id, item_id, target_id, vec <=> %(q)s as distance "
                "from candidates order by distance, ref limit %(cap)s"
            )
        else:
            # relaxed_order may return neighbours slightly out of order: sort again.
            sql = (
                "with nearest as materialized (select e.kind, e.ref, e.kb_id, e.item_id, "
                "e.target_id, e.vec <=> %(q)s as distance from search.embeddings e "
                f"where {where} order by e.vec <=> %(q)s limit %(cap)s) "
                "select * from nearest order by distance, ref"
            )
        for r in conn.execute(sql, params | {"kb": kb_id}).fetchall():
            kind = r["kind"]
            target = ("node" if kind == "memory" else kind, r["target_id"])
            similarity = 1.0 - float(r["distance"])
            hit = Hit(target, kind, r["ref"], r["kb_id"], r["item_id"], similarity)
            hits.append((float(r["distance"]), hit))
    hits.sort(key=lambda pair: (pair[0], pair[1].ref))
    return [hit for _, hit in hits], "exact" if small else "index"
