"""What should be embedded right now: the chunks of pages, files and mail, read from kb."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from subspace.db.pool import Conn
from subspace.indexer.chunking import Chunk, NodeSource, file_chunks, mail_chunk, page_chunks

ITEM_KINDS = ("page", "file", "mail")


@dataclass(frozen=True, order=True)
class IndexTarget:
    """One page, file or mail whose embeddings the indexer keeps current."""

    workspace_id: UUID
    kind: str  # page, file or mail
    item_id: UUID

    @property
    def lock_key(self) -> str:
        return f"index:{self.workspace_id}:{self.kind}:{self.item_id}"


def desired_chunks(
    conn: Conn, workspace_id: UUID, targets: Iterable[IndexTarget]
) -> dict[UUID, list[Chunk]]:
    """The chunks each target should have now, by item id. A deleted or missing item has none,
    so its embeddings are pruned; an archived or disabled one keeps them (search hides it)."""
    by_kind: dict[str, list[UUID]] = defaultdict(list)
    for target in targets:
        by_kind[target.kind].append(target.item_id)
    desired: dict[UUID, list[Chunk]] = {}
    for ids in by_kind.values():
        desired.update({item_id: [] for item_id in ids})
    if by_kind["page"]:
        desired.update(_pages(conn, workspace_id, by_kind["page"]))
    if by_kind["file"]:
        desired.update(_files(conn, workspace_id, by_kind["file"]))
    if by_kind["mail"]:
        desired.update(_mail(conn, workspace_id, by_kind["mail"]))
    return desired


def _pages(conn: Conn, ws: UUID, ids: list[UUID]) -> dict[UUID, list[Chunk]]:
    pages = conn.execute(
        "select id, kb_id, title, updated_at from kb.pages "
        "where workspace_id = %s and id = any(%s) and deleted_at is null",
        (ws, ids),
    ).fetchall()
    nodes: dict[UUID, list[NodeSource]] = defaultdict(list)
    for row in conn.execute(
        "select page_id, id, text, props->'memory' = 'true'::jsonb as is_memory, updated_at "
        "from kb.nodes where workspace_id = %s and page_id = any(%s)",
        (ws, [p["id"] for p in pages]),
    ):
        nodes[row["page_id"]].append(
            NodeSource(row["id"], row["text"], bool(row["is_memory"]), row["updated_at"])
        )
    return {
        p["id"]: page_chunks(p["id"], p["kb_id"], p["title"], p["updated_at"], nodes[p["id"]])
        for p in pages
    }


def _files(conn: Conn, ws: UUID, ids: list[UUID]) -> dict[UUID, list[Chunk]]:
    files = conn.execute(
        "select f.id, f.kb_id, t.extracted_at from kb.files f join search.file_text t "
        "on t.workspace_id = f.workspace_id and t.file_id = f.id "
        "where f.workspace_id = %s and f.id = any(%s) and f.deleted_at is null "
        "and f.status = 'ready'",
        (ws, ids),
    ).fetchall()
    pieces: dict[UUID, list[tuple[int, str]]] = defaultdict(list)
    for row in conn.execute(
        "select file_id, n, text from search.file_chunks where workspace_id = %s "
        "and file_id = any(%s) order by file_id, n",
        (ws, [f["id"] for f in files]),
    ):
        pieces[row["file_id"]].append((row["n"], row["text"]))
    return {
        f["id"]: file_chunks(f["id"], f["kb_id"], pieces[f["id"]], f["extracted_at"]) for f in files
    }


def _mail(conn: Conn, ws: UUID, ids: list[UUID]) -> dict[UUID, list[Chunk]]:
    rows = conn.execute(
        "select id, kb_id, subject, snippet, body_text, updated_at from kb.mail "
        "where workspace_id = %s and id = any(%s) and deleted_at is null",
        (ws, ids),
    ).fetchall()
    found: dict[UUID, list[Chunk]] = {}
    for m in rows:
        chunk = mail_chunk(
            m["id"], m["kb_id"], m["subject"], m["snippet"], m["body_text"], m["updated_at"]
        )
        found[m["id"]] = [chunk] if chunk else []
    return found


def all_targets(
    conn: Conn, *, workspace_id: UUID | None = None, kb_id: UUID | None = None
) -> list[IndexTarget]:
    """Every live page, file and mail (of one workspace or knowledge base), in a stable order."""
    clauses, params = ["deleted_at is null"], []
    if workspace_id is not None:
        clauses.append("workspace_id = %s")
        params.append(workspace_id)
    if kb_id is not None:
        clauses.append("kb_id = %s")
        params.append(kb_id)
    where = " and ".join(clauses)
    rows = conn.execute(
        f"select workspace_id, 'page' as kind, id from kb.pages where {where} "
        f"union all select workspace_id, 'file', id from kb.files where {where} "
        f"and status = 'ready' "
        f"union all select workspace_id, 'mail', id from kb.mail where {where} "
        "order by 1, 2, 3",
        params * 3,
    ).fetchall()
    return [IndexTarget(r["workspace_id"], r["kind"], r["id"]) for r in rows]
