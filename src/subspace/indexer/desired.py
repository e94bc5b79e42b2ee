"""What should be embedded right now: the chunks of pages, files and mail, read from kb."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from subspace.db.pool import Conn
from subspace.indexer.chunking import Chunk, NodeText, file_chunks, mail_chunk, page_chunks
from subspace.search import registry

ITEM_KINDS = ("page", "file", "mail")  # the items chunked here, by the kinds' item names
# The reasons after which an item has nothing to embed (no text, or none wanted): its
# embeddings are pruned. The other reasons (archived, disabled, excluded) keep them, and
# search hides the item by the same reasons.
GONE = ("deleted", "processing")


def _present(item: registry.ItemSpec, alias: str) -> str:
    """SQL: none of the GONE reasons holds for the item at `alias`."""
    return registry.joined(tuple(r for r in item.reasons if r.name in GONE), alias)


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
    node = registry.get("node")
    page, pa, na = node.item, node.item.alias, node.alias
    pages = conn.execute(
        f"select {pa}.{page.key} as id, {pa}.{page.kb} as kb_id, {pa}.{page.title} as title, "
        f"{pa}.updated_at from {page.table} {pa} where {pa}.workspace_id = %s "
        f"and {pa}.{page.key} = any(%s) and {_present(page, pa)}",
        (ws, ids),
    ).fetchall()
    nodes: dict[UUID, list[NodeText]] = defaultdict(list)
    for row in conn.execute(
        f"select {na}.{node.item_key} as page_id, {na}.{node.key} as id, {na}.{node.text} as text, "
        f"{registry.is_memory(na)} as is_memory, {na}.updated_at from {node.table} {na} "
        f"where {na}.workspace_id = %s and {na}.{node.item_key} = any(%s)",
        (ws, [p["id"] for p in pages]),
    ):
        nodes[row["page_id"]].append(
            NodeText(row["id"], row["text"], bool(row["is_memory"]), row["updated_at"])
        )
    return {
        p["id"]: page_chunks(p["id"], p["kb_id"], p["title"], p["updated_at"], nodes[p["id"]])
        for p in pages
    }


def _files(conn: Conn, ws: UUID, ids: list[UUID]) -> dict[UUID, list[Chunk]]:
    chunk = registry.get("file")
    file, fa, ca = chunk.item, chunk.item.alias, chunk.alias
    files = conn.execute(
        f"select {fa}.{file.key} as id, {fa}.{file.kb} as kb_id, t.extracted_at "
        f"from {file.table} {fa} join search.file_text t "
        f"on t.workspace_id = {fa}.workspace_id and t.file_id = {fa}.{file.key} "
        f"where {fa}.workspace_id = %s and {fa}.{file.key} = any(%s) and {_present(file, fa)}",
        (ws, ids),
    ).fetchall()
    first, number = chunk.ref  # a chunk is named by its file and its number
    pieces: dict[UUID, list[tuple[int, str]]] = defaultdict(list)
    for row in conn.execute(
        f"select {ca}.{first} as file_id, {ca}.{number} as n, {ca}.{chunk.text} as text "
        f"from {chunk.table} {ca} where {ca}.workspace_id = %s and {ca}.{first} = any(%s) "
        f"order by {ca}.{first}, {ca}.{number}",
        (ws, [f["id"] for f in files]),
    ):
        pieces[row["file_id"]].append((row["n"], row["text"]))
    return {
        f["id"]: file_chunks(f["id"], f["kb_id"], pieces[f["id"]], f["extracted_at"]) for f in files
    }


def _mail(conn: Conn, ws: UUID, ids: list[UUID]) -> dict[UUID, list[Chunk]]:
    spec = registry.get("mail")
    mail, a = spec.item, spec.alias
    rows = conn.execute(
        f"select {a}.{mail.key} as id, {a}.{mail.kb} as kb_id, {a}.{mail.title} as subject, "
        f"{a}.snippet, {a}.{spec.text} as body_text, {a}.updated_at from {mail.table} {a} "
        f"where {a}.workspace_id = %s and {a}.{mail.key} = any(%s) and {_present(mail, a)}",
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
    items = {item.name: item for item in registry.items()}
    parts: list[str] = []
    params: list[object] = []
    for name in ITEM_KINDS:
        item = items[name]
        a = item.alias
        clauses = [_present(item, a)]
        params.append(name)
        if workspace_id is not None:
            clauses.append(f"{a}.workspace_id = %s")
            params.append(workspace_id)
        if kb_id is not None:
            clauses.append(f"{a}.{item.kb} = %s")
            params.append(kb_id)
        parts.append(
            f"select {a}.workspace_id, %s::text as kind, {a}.{item.key} as id "
            f"from {item.table} {a} where {' and '.join(clauses)}"
        )
    rows = conn.execute(" union all ".join(parts) + " order by 1, 2, 3", params).fetchall()
    return [IndexTarget(r["workspace_id"], r["kind"], r["id"]) for r in rows]
