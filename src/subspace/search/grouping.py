"""Grouping fused results by page: the best row of each page, with an exact count of the rest."""

from __future__ import annotations

from uuid import UUID

from subspace.db.pool import Conn
from subspace.search.filters import Scope
from subspace.search.fusion import Fused
from subspace.search.lexical import TsQueries


def page_of(item: Fused) -> UUID | None:
    if item.target[0] == "node":
        return item.best_hit.item_id
    if item.target[0] == "page":
        return item.target[1]
    return None


def group_by_page(conn: Conn, scope: Scope, fused: list[Fused], tsq: TsQueries) -> list[Fused]:
    """Keep the best row of each page; count exactly how many other matches it has."""
    kept: list[Fused] = []
    on_page: dict[UUID, set[tuple[str, UUID]]] = {}
    for item in fused:
        page_id = page_of(item)
        if page_id is None:
            kept.append(item)
            continue
        if page_id not in on_page:
            on_page[page_id] = set()
            kept.append(item)
        on_page[page_id].add(item.target)
    if on_page and tsq.any_words:
        # Lexical matches beyond the legs' windows count too: the count is exact.
        pages = list(on_page)
        for r in conn.execute(
            "select 'node' as kind, n.id, n.page_id from kb.nodes n where n.workspace_id = %s "
            "and n.page_id = any(%s) and n.text_tsv @@ %s::tsquery "
            "union all select 'page', p.id, p.id from kb.pages p where p.workspace_id = %s "
            "and p.id = any(%s) and p.title_tsv @@ %s::tsquery",
            (scope.workspace_id, pages, tsq.any_words) * 2,
        ):
            on_page[r["page_id"]].add((r["kind"], r["id"]))
    for item in kept:
        page_id = page_of(item)
        if page_id is not None:
            item.more_on_page = len(on_page[page_id]) - 1
    return kept
