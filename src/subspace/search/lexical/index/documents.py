"""The engine's documents as Postgres holds them: each row of each kind, with its lexemes at
their positions (from its generated tsvector), its knowledge base, kind, item and the reasons
hiding it, generated from the kinds' declarations (search/registry.py).

The follower reads the documents of the items an outbox event names, a rebuild every
document; both through `documents_sql`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.lexical.index.layout import IndexDocument

FETCH_ROWS = 2_000  # rows a rebuild reads per round trip of its cursor


def part_column(spec: registry.KindSpec) -> str | None:
    """The column telling apart the rows of one target (a chunk's n), as a ref names a row
    by its key and that column (file:<file_id>:<n>); None when a target is one row."""
    return spec.ref[1] if len(spec.ref) == 2 and spec.ref[0] == spec.key else None


def kind_case(declared: tuple[registry.KindSpec, ...], alias: str) -> str:
    """SQL naming the kind of the row at `alias` among the kinds sharing its table (a bullet
    is a memory when its props say so)."""
    first = declared[0]
    if len(declared) == 1:
        return f"'{first.name}'"
    cases = " ".join(
        f"when coalesce({k.only(alias)}, false) then '{k.name}'"
        for k in declared[1:]
        if k.only is not None
    )
    return f"case {cases} else '{first.name}' end"


@functools.lru_cache(maxsize=64)
def documents_sql(source: str, of: str = "") -> str:
    """The rows of `source` with some text: all of them, or those of the (workspace, item)
    pairs (`of` "items") or the (workspace, target) pairs (`of` "targets") bound as
    %(workspaces)s and %(keys)s.

    Reasons that depend on who searches (a user's exclusions) are left to the search."""
    declared = registry.of_source(source)
    spec, a, item = declared[0], declared[0].alias, declared[0].item
    i = a if spec.in_item_table else item.alias
    join = "" if spec.in_item_table else f" join {item.table} {i} on {spec.item_link(a, i)}"
    reasons = [r for r in spec.reasons if r.hidden_items is None]
    hidden = ", ".join(
        f"case when {r.hidden(a if r in spec.row_reasons else i)} then '{r.name}' end"
        for r in reasons
    )
    runs = [k.asked_by_run(a) for k in declared if k.asked_by_run is not None]
    answer = f"coalesce({runs[0]}, false)" if runs else "false"
    part = part_column(spec)
    wanted = ""
    if of:
        column = {"items": spec.item_key, "targets": spec.key}[of]
        wanted = (
            f" and ({a}.workspace_id, {a}.{column}) in (select * from "
            "unnest(%(workspaces)s::uuid[], %(keys)s::uuid[]))"
        )
    return (
        f"select {a}.workspace_id as workspace, {kind_case(declared, a)} as kind, "
        f"{a}.{spec.key} as target, "
        f"{a}.{spec.item_key} as item, {i}.{item.kb} as kb, "
        f"{f'{a}.{part}' if part else '0'} as part, "
        f"array_remove(array[{hidden or 'null'}]::text[], null) as hidden, {answer} as answer, "
        "tokens.lexemes, tokens.positions "
        f"from {spec.table} {a}{join} "
        "cross join lateral (select array_agg(lx.lexeme order by pos, lx.lexeme) as lexemes, "
        f"array_agg(pos order by pos, lx.lexeme) as positions from unnest({a}.{spec.tsv}) lx, "
        "unnest(lx.positions) pos) tokens "
        f"where {a}.{spec.length} > 0{wanted}" + ("" if of else f" order by {a}.workspace_id")
        # A rebuild writes one workspace's indexes after another.
    )


def _document(source: str, row: dict[str, Any]) -> IndexDocument:
    return IndexDocument(
        workspace=row["workspace"],
        source=source,
        kind=row["kind"],
        target=row["target"],
        item=row["item"],
        kb=row["kb"],
        part=int(row["part"]),
        hidden=tuple(row["hidden"]),
        answer=bool(row["answer"]),
        lexemes=row["lexemes"] or [],
        positions=row["positions"] or [],
    )


def item_documents(
    conn: Conn, source: str, items: list[tuple[UUID, UUID]], *, targets: bool = False
) -> list[IndexDocument]:
    """The documents of `source` of these (workspace, item) pairs, or with `targets` of these
    (workspace, target) pairs, as they are now."""
    if not items:
        return []
    params = {"workspaces": [w for w, _ in items], "keys": [i for _, i in items]}
    rows = conn.execute(documents_sql(source, "targets" if targets else "items"), params)
    return [_document(source, row) for row in rows.fetchall()]


def all_documents(conn: Conn, source: str) -> Iterator[IndexDocument]:
    """Every document of `source`, read through a server-side cursor (the caller's
    transaction holds it)."""
    with conn.cursor(name=f"lexical_rebuild_{source}") as cursor:
        cursor.itersize = FETCH_ROWS
        cursor.execute(documents_sql(source))
        for row in cursor:
            yield _document(source, row)
