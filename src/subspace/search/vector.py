"""The vector leg: cosine nearest neighbours over search.embeddings, filtered and complete.

Filters (model, kinds, knowledge bases, visibility) are applied while the HNSW index is
walked, with pgvector's iterative scan so a selective filter still fills the window. When the
filtered set is small, an exact scan over it is both faster and exact.

Both compare the first `dimensions` numbers of each vector (the model's width; the rest is
zero padding, so the cosine is the same) with the query cut to that width: the walk uses the
model's own partial index on that expression (db/vector_index.py). The planner matches that
index's `where model = '<model>'` only when it plans for the model's value: the leg's
statements are never prepared (db/pipeline.py's `prepared`), as a generic plan would scan the
whole table.
"""

from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from pgvector import HalfVector

from subspace.db.pipeline import Later, all_rows, later, send
from subspace.db.pool import Conn
from subspace.db.vector_index import vector_expression
from subspace.providers.base import EmbeddingProvider, ProviderError, checked_vectors
from subspace.providers.breaker import breaker_for, failure_reason
from subspace.search import registry
from subspace.search.filters import Scope, any_of, embedding_not_excluded, embedding_visible
from subspace.search.fragments import Fragment, bind
from subspace.search.fusion import Hit
from subspace.search.shared import LargeBases, SearchRuntime

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
    return start_query_embedding(runtime, provider, text, timeout_s=timeout_s).result()


def start_query_embedding(
    runtime: SearchRuntime, provider: EmbeddingProvider, text: str, *, timeout_s: float
) -> Later[HalfVector]:
    """`embed_query`, started now: the provider works while the caller does something else,
    and `.result()` waits for what is left of `timeout_s` (EmbeddingUnavailable after it)."""
    cached = runtime.query_vectors.get(provider.model, text)
    if cached is not None:
        return Later(lambda: cached)
    embedding = start_embedding(runtime, provider, [text], timeout_s=timeout_s)

    def kept() -> HalfVector:
        (half,) = embedding.result()
        runtime.query_vectors.put(provider.model, text, half)
        return half

    return Later(kept)


def start_embedding(
    runtime: SearchRuntime, provider: EmbeddingProvider, texts: list[str], *, timeout_s: float
) -> Later[list[HalfVector]]:
    """The vectors of `texts` in one provider call on the runtime's embedding threads, kept in
    no cache; `.result()` waits for what is left of `timeout_s`. A failure or a timeout is
    EmbeddingUnavailable and counts against the provider's circuit, which, while open, refuses
    at once."""
    breaker = breaker_for(provider)
    if not breaker.allow():
        reason = breaker.last_reason or "error"
        refused = EmbeddingUnavailable(
            f"circuit open after {breaker.failures_in_a_row} failures ({reason})", reason=reason
        )
        return Later(lambda: _raise(refused))
    started = time.perf_counter()
    future = runtime.embed_threads.submit(provider.embed, texts)

    def wait() -> list[HalfVector]:
        left = max(0.0, timeout_s - (time.perf_counter() - started))
        try:
            raw = future.result(timeout=left)
            vectors = checked_vectors(
                raw, count=len(texts), model=provider.model, dimensions=provider.dimensions
            )
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
        return [HalfVector(vector) for vector in vectors]

    return Later(wait)


def _raise(error: Exception) -> Any:
    raise error


def _scope_sql(scope: Scope, model: str, excluded: str, kb_filter: Fragment) -> Fragment:
    """The embeddings of `model` the scope may see in the bases `kb_filter` names, without
    the query's -`excluded` words (a tsquery, or empty)."""
    kinds = any_of("e.kind", "kinds", sorted(k for k in scope.kinds if registry.get(k).embedded))
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


def cosine_similarity(a: HalfVector, b: HalfVector) -> float:
    """1 - cosine distance, as pgvector's `<=>` gives it (0 for a zero vector)."""
    x = np.asarray(a.to_list(), dtype=np.float64)
    y = np.asarray(b.to_list(), dtype=np.float64)
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y / norms) if norms else 0.0


def query_at_width(query: HalfVector, dimensions: int) -> HalfVector:
    """The query's first `dimensions` numbers (a stored query vector is padded to 1,536)."""
    return HalfVector(query.to_numpy()[:dimensions])


@dataclass(frozen=True)
class VectorLeg:
    """What the vector leg is asked: the hits it answers are nearest first, at most `cap` per
    knowledge base.

    `dimensions` is the model's width (provider.dimensions): vectors are compared on it.

    Small bases (under EXACT_SCAN_ROWS vectors) are scanned exactly, each under its own cap,
    so a small base is never crowded out. The large ones share one walk of the HNSW index of
    at most `walk` neighbours, each still capped at `cap`. Bases found large are remembered in
    `large_bases` (the SearchRuntime's); without it, every base is counted on every call."""

    scope: Scope
    query: HalfVector
    model: str
    dimensions: int
    cap: int
    walk: int  # neighbours one walk may collect for several large bases together
    excluded: str = ""
    large_bases: LargeBases | None = None


def queue_vector_leg(
    conn: Conn, leg: VectorLeg, sizes: Later[dict[UUID, int]] | None = None
) -> Later[tuple[list[Hit], str]]:
    """The vector leg's hits and the plan used, its statements queued; `sizes` are the bases'
    counts if already queued (queue_base_sizes), which are read here."""
    scope, model, cap = leg.scope, leg.model, leg.cap
    if not scope.kb_ids or not scope.kinds:
        return Later(lambda: ([], "none"))
    counted = (sizes or queue_base_sizes(conn, scope.workspace_id, model, leg.large_bases)).result()
    small = [kb for kb in scope.kb_ids if 0 < counted.get(kb, 0) < EXACT_SCAN_ROWS]
    large = [kb for kb in scope.kb_ids if counted.get(kb, 0) >= EXACT_SCAN_ROWS]
    query = query_at_width(leg.query, leg.dimensions)
    exact = []
    for kb_id in small:
        bases = Fragment("e.kb_id = %(kb)s", {"kb": kb_id})
        scan = _exact_sql(_scope_sql(scope, model, leg.excluded, bases), query, cap, leg.dimensions)
        exact.append(later(conn, scan.sql, scan.params, all_rows))
    walk = None
    # The large bases share one walk, as deep as their caps together up to `walk` (twice one
    # base's window: no search pays for a walk of a thousand neighbours), each base still
    # held to its cap.
    limit = min(MAX_INDEX_LIMIT, leg.walk, cap * len(large))
    if large:
        # Scoped to the caller's transaction: the search runs in one.
        send(
            conn,
            "select set_config('hnsw.ef_search', %s, true), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.max_scan_tuples', %s, true)",
            (str(max(40, limit)), str(MAX_SCAN_TUPLES)),
        )
        bases = Fragment("e.kb_id = any(%(large)s)", {"large": large})
        nearest = _index_sql(
            _scope_sql(scope, model, leg.excluded, bases), query, limit, leg.dimensions
        )
        walk = later(conn, nearest.sql, nearest.params, all_rows)

    def finish() -> tuple[list[Hit], str]:
        rows = [row for scan in exact for row in scan.result()]
        if walk is not None:
            per_base: dict[Any, int] = {}
            for row in walk.result():
                per_base[row["kb_id"]] = per_base.get(row["kb_id"], 0) + 1
                if per_base[row["kb_id"]] <= cap:
                    rows.append(row)
            # A base that came back short may have shrunk: count it next time. Alone on the
            # walk, short means under its cap; sharing it, bases fall short by design, so only
            # a base that got nothing is counted again.
            expected = cap if len(large) == 1 else 1
            for kb_id in large:
                if leg.large_bases is not None and per_base.get(kb_id, 0) < expected:
                    leg.large_bases.forget(model, kb_id)
        plan = "index" if large and not small else "exact" if small and not large else "mixed"
        return _hits(rows), plan if rows or large or small else "none"

    return Later(finish)


def _hits(rows: list[dict[str, Any]]) -> list[Hit]:
    hits: list[tuple[float, Hit]] = []
    for r in rows:
        if float(r["distance"]) >= MAX_DISTANCE:
            continue
        kind = r["kind"]
        target = (registry.target_of(kind), r["target_id"])
        hit = Hit(target, kind, r["ref"], r["kb_id"], r["item_id"], 1.0 - float(r["distance"]))
        hits.append((float(r["distance"]), hit))
    hits.sort(key=lambda pair: (pair[0], pair[1].ref))
    return [hit for _, hit in hits]


def queue_base_sizes(
    conn: Conn, workspace_id: UUID, model: str, large_bases: LargeBases | None
) -> Later[dict[UUID, int]]:
    """Each knowledge base's vector count under `model`, counted only up to EXACT_SCAN_ROWS
    (an index-only scan); the statement queued.

    A base found large is remembered for a while: counting ten large bases costs more than
    the search itself, and one that shrank meanwhile is still searched correctly through the
    index. Small and empty bases are counted every time, so a new vector is never missed.
    Every base of the workspace is counted, so this can be queued before the search's scope
    is known.
    """
    known = large_bases.known(model, at_least=EXACT_SCAN_ROWS) if large_bases else {}

    def shape(rows: list[dict[str, Any]]) -> dict[UUID, int]:
        sizes = dict(known)
        for r in rows:
            sizes[r["kb_id"]] = int(r["n"])
            if r["n"] >= EXACT_SCAN_ROWS and large_bases is not None:
                large_bases.remember(model, r["kb_id"], int(r["n"]))
        return sizes

    return later(
        conn,
        "select kb.id as kb_id, (select count(*) from (select 1 from search.embeddings e "
        "where e.workspace_id = %(ws)s and e.model = %(model)s and e.kb_id = kb.id "
        f"limit {EXACT_SCAN_ROWS}) c) as n from kb.knowledge_bases kb "
        "where kb.workspace_id = %(ws)s and kb.id <> all(%(known)s::uuid[])",
        {"ws": workspace_id, "model": model, "known": list(known)},
        shape,
    )
