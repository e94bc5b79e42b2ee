"""Browsing without a query: the items matching the filters, most recently changed first."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from subspace.db.pool import Conn
from subspace.search import registry
from subspace.search.filters import Scope, item_visible
from subspace.search.fragments import Fragment, bind
from subspace.search.fusion import Fused, Hit
from subspace.search.hydrate import Row, hydrate
from subspace.search.lexical.terms import TsQueries


def shown_as(item: registry.ItemSpec) -> registry.KindSpec | None:
    """The kind a browsed item is shown as: the one whose targets are the items themselves
    (a page's title, a file's chunks, a mail); None when no kind of the item's is."""
    return next(
        (s for s in registry.of_item(item.name) if s.in_item_table or s.key == s.item_key), None
    )


def browse(conn: Conn, scope: Scope, limit: int) -> list[Row]:
    """Without a query: the items matching the filters, most recently changed first (by their
    tables' `updated_at`), each item searched when any of its kinds is."""
    parts: list[Fragment] = []
    for item in registry.items():
        spec = shown_as(item)
        if spec is None or not any(s.name in scope.kinds for s in registry.of_item(item.name)):
            continue
        i = item.alias
        visible = item_visible(scope, item, i)
        parts.append(
            Fragment(
                f"select '{spec.name}' as kind, {i}.{item.key} as id, {i}.{item.kb} as kb_id, "
                f"{i}.updated_at from {item.table} {i} where {i}.workspace_id = %(ws)s "
                f"and {i}.{item.kb} = any(%(kbs)s) and {visible.sql}",
                visible.params,
            )
        )
    if not parts or not scope.kb_ids:
        return []
    rows = conn.execute(
        " union all ".join(p.sql for p in parts) + " order by updated_at desc, id limit %(limit)s",
        bind(scope.shared(), *parts, Fragment("", {"limit": limit})),
    ).fetchall()
    items: list[Fused] = []
    for r in rows:
        spec = registry.get(r["kind"])
        ref = _first_ref(conn, scope, spec, r["id"])
        if ref is None:  # a file with no chunk to show
            continue
        hit = Hit((spec.target_kind, r["id"]), spec.name, ref, r["kb_id"], r["id"], 0.0)
        items.append(Fused(hit.target, 0.0, {"browse": (len(items) + 1, hit)}))
    return hydrate(conn, scope, items, TsQueries())


def _first_ref(conn: Conn, scope: Scope, spec: registry.KindSpec, ident: UUID) -> str | None:
    """The ref of the item's first visible row: `mail:<id>`, or a file's first chunk
    `file:<id>:<n>`; None when it has none."""
    if len(spec.ref) == 1:
        return spec.ref_of(ident)
    later = ", ".join(f"a.{column}" for column in spec.ref[1:])
    first: dict[str, Any] | None = conn.execute(
        f"select {later} from {spec.table} a where a.workspace_id = %s "
        f"and a.{spec.ref[0]} = %s and {spec.row_visible('a')} order by {later} limit 1",
        (scope.workspace_id, ident),
    ).fetchone()
    if first is None:
        return None
    return spec.ref_of(ident, *first.values())
