"""Each embedding model's HNSW index, at the model's width (the SQL is in migration 0015).

A model's index is a partial expression index on `subvector(vec, 1, d)::halfvec(d)` where
`model` is that model, named `search.vector_index_name(model)`. The first write of a model
registers it and builds its index while it is nearly empty; bulk loads drop it, write, and
build it once at the end, which is several times faster than growing the graph row by row.
"""

from __future__ import annotations

from subspace.db.pool import Conn


def vector_expression(dimensions: int, column: str = "e.vec") -> str:
    """The indexed expression, spelled as the index spells it so the planner matches it.

    >>> vector_expression(256)
    'subvector(e.vec, 1, 256)::halfvec(256)'
    """
    width = int(dimensions)  # spliced into SQL: an int, never text
    return f"subvector({column}, 1, {width})::halfvec({width})"


def register_vector_model(conn: Conn, model: str, dimensions: int) -> bool:
    """Register `model` at `dimensions` and build its index if it was unknown; true when it
    was. Called by every embedding write: a known model costs one primary-key lookup. A model
    known at another width raises (a model name means one width)."""
    row = conn.execute(
        "select search.register_vector_model(%s, %s) as new", (model, dimensions)
    ).fetchone()
    return bool(row and row["new"])


def defer_vector_index(conn: Conn, model: str, dimensions: int) -> None:
    """Before a bulk load of `model`: register it and drop its index, so writes go to the
    table alone; run VECTOR_INDEX_SQL (or build_vector_indexes) afterwards."""
    register_vector_model(conn, model, dimensions)
    conn.execute("select search.drop_vector_index(%s)", (model,))


def build_vector_indexes(conn: Conn) -> int:
    """Build every registered model's missing index; return how many were built."""
    row = conn.execute("select search.build_vector_indexes() as built").fetchone()
    return int(row["built"]) if row else 0


def forget_unused_models(conn: Conn) -> list[str]:
    """Drop the index and registration of every model without vectors; return their names.

    An old model's index stays while its vectors do (a search with that provider still
    uses it); once they are gone it only costs writes.
    """
    rows = conn.execute(
        "select model from public.vector_models m where not exists "
        "(select 1 from search.embeddings e where e.model = m.model) order by model"
    ).fetchall()
    models = [str(r["model"]) for r in rows]
    for model in models:
        conn.execute("select search.drop_vector_index(%s)", (model,))
        conn.execute("delete from public.vector_models where model = %s", (model,))
    return models
