"""The vector leg: cosine nearest neighbours over search.embeddings, filtered and complete.

Filters (model, kinds, knowledge bases, visibility) are applied while the HNSW index is
walked, with pgvector's iterative scan so a selective filter still fills the window. When the
filtered set is small, an exact scan over it is both faster and exact.

Both compare the first `dimensions` numbers of each vector (the model's width; the rest is
zero padding, so the cosine is the same) with the query cut to that width: the walk uses the
model's own partial index on that expression (db/vector_index.py). The planner matches that
index's `where model = '<model>'` only when it plans for the model's value, as searches do
(plan_cache_mode = force_custom_plan): a generic plan would scan the whole table.
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from uuid import UUID

from pgvector import HalfVector

from subspace.db.pool import Conn
from subspace.db.vector_index import vector_expression
from subspace.providers.base import EmbeddingProvider, ProviderError, checked_vectors
from subspace.providers.breaker import breaker_for, failure_reason
from subspace.search import kinds as registry
from subspace.search.filters import Scope, any_of, embedding_not_excluded, embedding_visible
from subspace.search.fragments import Fragment, bind
from subspace.search.fusion import Hit
from subspace.search.runtime import LargeBases, SearchRuntime

EXACT_SCAN_ROWS = 2_000  # below this many candidate rows an exact scan beats the index
MAX_SCAN_TUPLES = 50_000  # how far an iterative scan may walk before it gives up
MAX_INDEX_LIMIT = 1_000  # neighbours one index walk collects for all large bases together
MAX_DISTANCE = 1.0  # cosine distance 1 means orthogonal: no relation worth ranking


class EmbeddingUnavailable(Exception):
    """The query could not be embedded in time; the search goes on without the vector leg.

    `reason` is refused, timeout or error (see providers/breaker.py).
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def embed_query(
    runtime: SearchRuntime, provider: EmbeddingProvider, text: str, *, timeout_s: float
) -> HalfVector:
    """The query's vector, from the runtime's cache or the provider within `timeout_s` (on the
    runtime's embedding threads, so a hung provider holds one of them, not the search).

    While the provider's circuit is open (it failed FAILURES_TO_OPEN times in a row), the
    provider is not called at all and the last failure's reason is raised at once.
    """
    cached = runtime.query_vectors.get(provider.model, text)
    if cached is not None:
        return cached
    breaker = breaker_for(provider)
    if not breaker.allow():
        reason = breaker.last_reason or "error"
        raise EmbeddingUnavailable(
            f"circuit open after {breaker.failures_in_a_row} failures ({reason})", reason=reason
        )
    started = time.perf_counter()
    future = runtime.embed_threads.submit(provider.embed, [text])
    try:
        raw = future.result(timeout=timeout_s)
        vector = checked_vectors(raw, count=1, model=provider.model, dimensions=provider.dimensions)
    except FutureTimeout:
        future.cancel()
        breaker.record_failure("timeout", time.perf_counter() - started)
        raise EmbeddingUnavailable(f"timeout after {timeout_s:g} s", reason="timeout") from None
    except Exception as exc:  # any provider failure degrades the search, never breaks it
        reason = failure_reason(exc)
        breaker.record_failure(reason, time.perf_counter() - started)
        message = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
        raise EmbeddingUnavailable(message, reason=reason) from None
    breaker.record_success(time.perf_counter() - started)
    half = HalfVector(vector[0])
    runtime.query_vectors.put(provider.model, text, half)
    return half


def _scope_sql(scope: Scope, model: str, excluded: str, kb_filter: Fragment) -> Fragment:
    """The embeddings of `model` the scope may see in the bases `kb_filter` names, without
    the query's -`excluded` words (a tsquery, or empty)."""
    kinds = any_of("e.kind", "kinds", sorted(scope.kinds))
    parts = [
        Fragment(
            f"e.workspace_id = %(ws)s and e.model = %(model)s and {kinds.sql}",
            bind(scope.shared(), kinds, Fragment("", {"model": model})),
        ),
        kb_filter,
        embedding_visible(scope),
    ]
    if excluded:
        parts.append(embedding_not_excluded(excluded))
    return Fragment(" and ".join(part.sql for part in parts), bind(*parts))


_COLUMNS = "e.kind, e.ref, e.kb_id, e.item_id, e.target_id"


def _exact_sql(where: Fragment, query: HalfVector, cap: int, dimensions: int) -> Fragment:
    # A materialized set cannot use the vector index: the scan is exact.
    return Fragment(
        f"with candidates as materialized (select {_COLUMNS}, "
        f"{vector_expression(dimensions)} as vec from search.embeddings e "
        f"where {where.sql}) select kind, ref, kb_id, item_id, target_id, "
        "vec <=> %(q)s as distance from candidates order by distance, ref limit %(cap)s",
        bind(where, Fragment("", {"q": query, "cap": cap})),
    )


def _index_sql(where: Fragment, query: HalfVector, limit: int, dimensions: int) -> Fragment:
    # relaxed_order may return neighbours slightly out of order: sort again.
    vec = vector_expression(dimensions)
    return Fragment(
        f"with nearest as materialized (select {_COLUMNS}, {vec} <=> %(q)s as distance "
        f"from search.embeddings e where {where.sql} order by {vec} <=> %(q)s "
        f"limit {int(limit)}) select * from nearest order by distance, ref",
        bind(where, Fragment("", {"q": query})),
    )


def query_at_width(query: HalfVector, dimensions: int) -> HalfVector:
    """The query's first `dimensions` numbers (a stored query vector is padded to 1,536)."""
    return HalfVector(query.to_numpy()[:dimensions])


def vector_leg(
    conn: Conn,
    scope: Scope,
    query: HalfVector,
    *,
    model: str,
    dimensions: int,
    cap: int,
    excluded: str = "",
    large_bases: LargeBases | None = None,
) -> tuple[list[Hit], str]:
    """The leg's hits, nearest first, at most `cap` per knowledge base; and the plan used.

    `dimensions` is the model's width (provider.dimensions): vectors are compared on it.

    Small bases (under EXACT_SCAN_ROWS vectors) are scanned exactly, each under its own cap,
    so a small base is never crowded out. The large ones share one walk of the HNSW index,
    each still capped at `cap`. Bases found large are remembered in `large_bases` (the
    SearchRuntime's); without it, every base is counted on every call.
    """
    if not scope.kb_ids or not scope.kinds:
        return [], "none"
    sizes = _base_sizes(conn, bind(scope.shared()) | {"model": model}, model, large_bases)
    small = [kb for kb in scope.kb_ids if sizes.get(kb, 0) < EXACT_SCAN_ROWS and sizes.get(kb)]
    large = [kb for kb in scope.kb_ids if sizes.get(kb, 0) >= EXACT_SCAN_ROWS]
    rows: list[dict[str, Any]] = []
    query = query_at_width(query, dimensions)
    if small:
        for kb_id in small:
            where = _scope_sql(scope, model, excluded, Fragment("e.kb_id = %(kb)s", {"kb": kb_id}))
            exact = _exact_sql(where, query, cap, dimensions)
            rows.extend(conn.execute(exact.sql, exact.params).fetchall())
    if large:
        # The large bases share one walk: twice one base's cap covers the fused top rows
        # without making every search pay for a walk of a thousand neighbours.
        limit = min(MAX_INDEX_LIMIT, cap * min(2, len(large)))
        # Scoped to the caller's transaction: the search runs in one.
        conn.execute(  # one round trip
            f"set local hnsw.ef_search = {max(40, limit)}; "
            "set local hnsw.iterative_scan = relaxed_order; "
            f"set local hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}"
        )
        bases = Fragment("e.kb_id = any(%(large)s)", {"large": large})
        where = _scope_sql(scope, model, excluded, bases)
        nearest = _index_sql(where, query, limit, dimensions)
        found = conn.execute(nearest.sql, nearest.params).fetchall()
        per_base: dict[Any, int] = {}
        for row in found:
            per_base[row["kb_id"]] = per_base.get(row["kb_id"], 0) + 1
            if per_base[row["kb_id"]] <= cap:
                rows.append(row)
        # A base that came back short may have shrunk: count it next time. Alone on the walk,
        # short means under its cap; sharing it, bases fall short by design, so only a base
        # that got nothing is counted again.
        expected = cap if len(large) == 1 else 1
        for kb_id in large:
            if large_bases is not None and per_base.get(kb_id, 0) < expected:
                large_bases.forget(model, kb_id)
    plan = "index" if large and not small else "exact" if small and not large else "mixed"
    hits: list[tuple[float, Hit]] = []
    for r in rows:
        if float(r["distance"]) >= MAX_DISTANCE:
            continue
        kind = r["kind"]
        target = (registry.target_of(kind), r["target_id"])
        hit = Hit(target, kind, r["ref"], r["kb_id"], r["item_id"], 1.0 - float(r["distance"]))
        hits.append((float(r["distance"]), hit))
    hits.sort(key=lambda pair: (pair[0], pair[1].ref))
    return [hit for _, hit in hits], plan if rows or large or small else "none"


def _base_sizes(
    conn: Conn, params: dict[str, Any], model: str, large_bases: LargeBases | None
) -> dict[UUID, int]:
    """Each base's vector count, counted only up to EXACT_SCAN_ROWS (an index-only scan).

    A base found large is remembered for a while: counting ten large bases costs more than
    the search itself, and one that shrank meanwhile is still searched correctly through the
    index. Small and empty bases are counted every time, so a new vector is never missed.
    """
    sizes: dict[UUID, int] = {}
    uncounted = []
    for kb_id in params["kbs"]:
        counted = (
            large_bases.size(model, kb_id, at_least=EXACT_SCAN_ROWS)
            if large_bases is not None
            else None
        )
        if counted is not None:
            sizes[kb_id] = counted
        else:
            uncounted.append(kb_id)
    if uncounted:
        for r in conn.execute(
            "select kb.id as kb_id, (select count(*) from (select 1 from search.embeddings e "
            "where e.workspace_id = %(ws)s and e.model = %(model)s and e.kb_id = kb.id "
            f"limit {EXACT_SCAN_ROWS}) c) as n from unnest(%(uncounted)s::uuid[]) kb(id)",
            params | {"uncounted": uncounted},
        ):
            sizes[r["kb_id"]] = int(r["n"])
            if r["n"] >= EXACT_SCAN_ROWS and large_bases is not None:
                large_bases.remember(model, r["kb_id"], int(r["n"]))
    return sizes
