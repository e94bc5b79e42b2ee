"""Reading one item whole once search or grep has found it: a page as an outline, a bullet with
everything under it, or any item by the ref search and grep print (`page:<id>`, `node:<id>`,
`file:<id>` or `file:<id>:<n>`, `mail:<id>`, a bare page id, or the ref of any kind the
registry declares in search/registry.py). Hidden items are NotFound."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import NotFound
from subspace.models import TreeNode
from subspace.search import refs, registry

BARE = "page"  # a bare id names a page (kb.read took page ids before refs existed)


def ref_target(spec: str) -> tuple[str, UUID, int | None] | None:
    """(kind, id, chunk number) when `spec` is a ref or a bare id (a page), else None. The
    kind is the one a hit counts as: a memory's ref reads as a node.

    >>> ref_target("file:6f1c0a4e-2b9d-4c53-9a51-0d6f3c1e8b27:3")[2]
    3
    """
    ref = refs.parse_ref(spec)
    if ref is None:
        return None
    kind = BARE if ref.kind is None else ref.kind.target_kind
    return kind, ref.id, ref.chunk


def read_ref(cx: Context, kind: str, item_id: UUID, chunk: int | None = None) -> str:
    """The item as text with a heading line that ends in its ref."""
    spec = refs.kind_named(kind)
    if spec is None:
        raise NotFound(kind, item_id)
    reader = _READERS.get(spec.target_kind)
    if reader is not None:
        return reader(cx, item_id, chunk)
    return _read_row(cx, spec, item_id, () if chunk is None else (chunk,))


def _read_row(cx: Context, spec: registry.KindSpec, ident: UUID, more: tuple[int, ...]) -> str:
    """A row of `spec` by its ref's values, with its item's title, if no reason hides it."""
    values = (ident, *more)
    a = spec.alias
    i = a if spec.in_item_table else spec.item.alias
    join = "" if spec.in_item_table else f" join {spec.item.table} {i} on {spec.item_link()}"
    wanted = [f"{a}.{column} = %(v{n})s" for n, column in enumerate(spec.ref[: len(values)])]
    order = ", ".join(f"{a}.{column}" for column in spec.ref)  # a shorter ref: its first row
    with cx.transaction() as conn:
        row = conn.execute(
            f"select {i}.{spec.item.title} as title, {a}.{spec.text} as text "
            f"from {spec.table} {a}{join} where {a}.workspace_id = %(ws)s "
            f"and {' and '.join(wanted)} and {spec.item.visible(i)} and {spec.row_visible()} "
            f"order by {order} limit 1",
            {"ws": cx.actor.workspace_id, "user": cx.actor.user_id}
            | {f"v{n}": value for n, value in enumerate(values)},
        ).fetchone()
    if row is None:
        if len(values) < len(spec.ref):
            raise NotFound(spec.name, ident)
        raise NotFound(f"{spec.item.name} chunk" if len(values) > 1 else spec.name,
                       ":".join(map(str, values)))  # fmt: skip
    return f"# {row['title']} ({':'.join(map(str, [spec.prefix, *values]))})\n{row['text']}"


def _read_page(cx: Context, page_id: UUID, chunk: int | None) -> str:
    return kb_read(cx, page_id)


def _read_node(cx: Context, node_id: UUID, chunk: int | None) -> str:
    return kb_node_read(cx, node_id)


def _read_file(cx: Context, file_id: UUID, chunk: int | None) -> str:
    """A file chunk as any kind's row; a whole file from its extracted text."""
    spec = registry.get("file")
    if chunk is not None:
        return _read_row(cx, spec, file_id, (chunk,))
    f = spec.item.alias
    text = f" join search.file_text t on t.workspace_id = {f}.workspace_id and t.file_id = {f}.id"
    with cx.transaction() as conn:
        row = _visible_item(conn, cx, spec.item, f"{f}.{spec.item.title} as title, t.text",
                            file_id, join=text)  # fmt: skip
    return f"# {row['title']} ({spec.prefix}:{file_id})\n{row['text']}"


def _read_mail(cx: Context, mail_id: UUID, chunk: int | None) -> str:
    spec = registry.get("mail")
    with cx.transaction() as conn:
        row = _visible_item(conn, cx, spec.item,
                            "subject, sender, recipients, sent_at, body_text", mail_id)  # fmt: skip
    sent = "" if row["sent_at"] is None else row["sent_at"].isoformat()
    return "\n".join(
        [
            f"# {row['subject'] or '(no subject)'} ({spec.ref_of(mail_id)})",
            f"From: {row['sender']}",
            f"To: {row['recipients']}",
            f"Date: {sent}",
            "",
            row["body_text"],
        ]
    )


# How the built-in kinds read whole: a page as its outline, a bullet with its subtree, a file
# without a chunk number from its full text, a mail with its headers. Any other kind reads
# as its row's text under its item's title (_read_row).
_READERS: dict[str, Callable[[Context, UUID, int | None], str]] = {
    "page": _read_page,
    "node": _read_node,
    "file": _read_file,
    "mail": _read_mail,
}


def _visible_item(
    conn: Conn, cx: Context, item: registry.ItemSpec, columns: str, ident: UUID, join: str = ""
) -> dict[str, Any]:
    """`columns` of item `ident` (its table aliased as the item's alias, with `join`) when no
    reason hides it from the caller; NotFound otherwise."""
    a = item.alias
    row = conn.execute(
        f"select {columns} from {item.table} {a}{join} where {a}.workspace_id = %(ws)s "
        f"and {a}.{item.key} = %(id)s and {item.visible()}",
        {"ws": cx.actor.workspace_id, "user": cx.actor.user_id, "id": ident},
    ).fetchone()
    if row is None:
        raise NotFound(item.name, ident)
    return row


def _visible_page_tree(cx: Context, conn: Conn, page_id: UUID) -> tuple[str, list[TreeNode]]:
    item = registry.get("page").item
    row = _visible_item(conn, cx, item, f"{item.alias}.{item.title} as title", page_id)
    page = queries.get_page_tree(conn, cx.actor.workspace_id, page_id)
    return row["title"], page.nodes


def _outline(nodes: list[TreeNode]) -> list[str]:
    """The bullets as indented lines, in reading order (without recursion: an outline may
    nest deeper than Python's stack)."""
    lines = []
    stack = [(node, 0) for node in reversed(nodes)]
    while stack:
        node, depth = stack.pop()
        marker = " [memory]" if node.is_memory else ""
        lines.append(f"{'  ' * depth}- {node.text}{marker} (node:{node.id})")
        stack.extend((child, depth + 1) for child in reversed(node.children))
    return lines


def kb_read(cx: Context, page_id: UUID) -> str:
    """A visible page as an indented outline; hidden or unknown pages are NotFound."""
    with cx.transaction() as conn:
        title, nodes = _visible_page_tree(cx, conn, page_id)
    return "\n".join([f"# {title or 'Untitled'} (page:{page_id})", *_outline(nodes)])


def kb_node_read(cx: Context, node_id: UUID) -> str:
    """One bullet of a visible page with everything under it."""
    with cx.transaction() as conn:
        node = queries.get_node(conn, cx.actor.workspace_id, node_id)
        title, nodes = _visible_page_tree(cx, conn, node.page_id)
    found = _find(nodes, node_id)
    if found is None:
        raise NotFound("node", node_id)
    return "\n".join([f"# {title or 'Untitled'} (page:{node.page_id})", *_outline([found])])


def _find(nodes: list[TreeNode], node_id: UUID) -> TreeNode | None:
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node.id == node_id:
            return node
        stack.extend(node.children)
    return None
