"""Browsing without a query: the items matching the filters, most recently changed first."""

from __future__ import annotations

from subspace.db.pool import Conn
from subspace.search.filters import Scope, file_visible, mail_visible, page_visible, tag_predicates
from subspace.search.fusion import Fused, Hit
from subspace.search.hydrate import Row, hydrate
from subspace.search.lexical import TsQueries

BROWSE_KINDS = ("page", "file", "mail")


def browse(conn: Conn, scope: Scope, limit: int) -> list[Row]:
    """Without a query: the items matching the filters, most recently changed first."""
    parts, params = [], scope.params() | {"limit": limit}
    if "page" in scope.kinds or "node" in scope.kinds or "memory" in scope.kinds:
        parts.append(
            "select 'page' as kind, p.id, p.kb_id, p.updated_at from kb.pages p "
            f"where p.workspace_id = %(ws)s and p.kb_id = any(%(kbs)s) and {page_visible('p')}"
            f"{tag_predicates(scope, 'p', 'page')}"
        )
    if "file" in scope.kinds:
        parts.append(
            "select 'file' as kind, f.id, f.kb_id, f.updated_at from kb.files f "
            f"where f.workspace_id = %(ws)s and f.kb_id = any(%(kbs)s) and {file_visible('f')}"
            f"{tag_predicates(scope, 'f', 'file')}"
        )
    if "mail" in scope.kinds:
        parts.append(
            "select 'mail' as kind, m.id, m.kb_id, m.updated_at from kb.mail m "
            f"where m.workspace_id = %(ws)s and m.kb_id = any(%(kbs)s) and {mail_visible('m')}"
            f"{tag_predicates(scope, 'm', 'mail')}"
        )
    if not parts or not scope.kb_ids:
        return []
    rows = conn.execute(
        " union all ".join(parts) + " order by updated_at desc, id limit %(limit)s", params
    ).fetchall()
    items: list[Fused] = []
    for r in rows:
        if r["kind"] == "file":
            first = conn.execute(
                "select min(n) as n from search.file_chunks where workspace_id = %s "
                "and file_id = %s and enabled",
                (scope.workspace_id, r["id"]),
            ).fetchone()
            if first is None or first["n"] is None:
                continue
            ref = f"file:{r['id']}:{first['n']}"
        else:
            ref = f"{r['kind']}:{r['id']}"
        hit = Hit((r["kind"], r["id"]), r["kind"], ref, r["kb_id"], r["id"], 0.0)
        items.append(Fused(hit.target, 0.0, {"browse": (len(items) + 1, hit)}, []))
    return hydrate(conn, scope, items, TsQueries("", "", ""))
