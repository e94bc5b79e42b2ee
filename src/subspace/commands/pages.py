"""Page commands: create, rename, archive, delete and restore."""

from __future__ import annotations

from uuid import UUID, uuid4

from subspace.commands.nodes import check_base_version, node_text
from subspace.commands.retry import retried
from subspace.commands.states import ARCHIVE, DELETE, RESTORE, set_state
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.ingest.outline import OutlineItem
from subspace.models import PageSummary
from subspace.outbox.append import append_event
from subspace.text import single_line


def page_title(cx: Context, title: str) -> str:
    """A page title cleaned and checked against SUBSPACE_MAX_TITLE_CHARS."""
    return single_line(
        title,
        what="A page title",
        limit=cx.settings.max_title_chars,
        setting="SUBSPACE_MAX_TITLE_CHARS",
        required=False,
    )


def resolve_kb(cx: Context, conn: Conn, kb_id: UUID | None) -> UUID:
    """`kb_id` checked to be in the workspace, or the workspace's default knowledge base."""
    if kb_id is None:
        return queries.default_knowledge_base(conn, cx.actor.workspace_id).id
    return queries.get_knowledge_base(conn, cx.actor.workspace_id, kb_id).id


@retried
def create_page(cx: Context, title: str, *, kb_id: UUID | None = None) -> PageSummary:
    """Create an empty page in `kb_id` (default: the workspace's default knowledge base)."""
    title = page_title(cx, title)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        row = conn.execute(
            "insert into kb.pages (workspace_id, kb_id, title) values (%s, %s, %s) returning id",
            (ws, kb, title),
        ).fetchone()
        assert row is not None
        append_event(conn, cx.actor.workspace_id, "page.created", page_id=row["id"])
        return queries.get_page(conn, ws, row["id"])


@retried
def create_page_from_outline(
    cx: Context,
    title: str,
    items: list[OutlineItem],
    *,
    kb_id: UUID | None = None,
    source_sha256: str | None = None,
    source_path: str | None = None,
) -> PageSummary:
    """Create a page with a whole tree of bullets in one transaction and one event.

    Bulk-loads the nodes, so importing a long document costs one round trip, not one per
    bullet. `source_sha256` and `source_path` record the file the page came from, so importing
    it again updates this page (commands/sources.py).
    """
    title = page_title(cx, title)
    ws = cx.actor.workspace_id
    rows: list[tuple[UUID, UUID | None, int, str]] = []

    def flatten(parent: UUID | None, children: list[OutlineItem]) -> None:
        for position, item in enumerate(children):
            node_id = uuid4()
            rows.append((node_id, parent, position, node_text(cx, item.text)))
            flatten(node_id, item.children)

    flatten(None, items)
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        row = conn.execute(
            "insert into kb.pages (workspace_id, kb_id, title, source_sha256, source_path) "
            "values (%s, %s, %s, %s, %s) returning id",
            (ws, kb, title, source_sha256, source_path),
        ).fetchone()
        assert row is not None
        page_id = row["id"]
        with conn.cursor().copy(
            "copy kb.nodes (workspace_id, id, page_id, parent_id, position, text) from stdin"
        ) as copy:
            for node_id, parent, position, text in rows:
                copy.write_row((ws, node_id, page_id, parent, position, text))
        append_event(conn, ws, "page.created", page_id=page_id, nodes=len(rows))
        return queries.get_page(conn, ws, page_id)


def find_page_by_source(cx: Context, kb_id: UUID, source_sha256: str) -> PageSummary | None:
    """A live page imported from a file with this hash, if any."""
    with cx.transaction() as conn:
        row = conn.execute(
            f"select {queries.PAGE_COLUMNS} from kb.pages where workspace_id = %s "
            "and kb_id = %s and source_sha256 = %s and deleted_at is null limit 1",
            (cx.actor.workspace_id, kb_id, source_sha256),
        ).fetchone()
    return None if row is None else PageSummary(**row)


@retried
def rename_page(
    cx: Context, page_id: UUID, title: str, *, base_version: int | None = None
) -> PageSummary:
    title = page_title(cx, title)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        check_base_version(queries.get_page(conn, ws, page_id, lock=True), base_version)
        conn.execute(
            "update kb.pages set title = %s, updated_at = now(), version = version + 1 "
            "where workspace_id = %s and id = %s",
            (title, ws, page_id),
        )
        append_event(conn, cx.actor.workspace_id, "page.renamed", page_id=page_id)
        return queries.get_page(conn, ws, page_id)


@retried
def _set_page_state(
    cx: Context, page_id: UUID, assignment: str, event: str, base_version: int | None
) -> PageSummary:
    with cx.transaction() as conn:
        page = queries.get_page(conn, cx.actor.workspace_id, page_id, lock=True)
        check_base_version(page, base_version)
        # Archiving, deleting and restoring change what the page is, so they move its version.
        assignment = f"{assignment}, version = version + 1"
        return set_state(cx.on(conn), "page", page_id, assignment, event, queries.get_page)


def archive_page(cx: Context, page_id: UUID, *, base_version: int | None = None) -> PageSummary:
    """Hide the page from search, grep, read and RAG until it is restored."""
    return _set_page_state(cx, page_id, ARCHIVE, "page.archived", base_version)


def delete_page(cx: Context, page_id: UUID, *, base_version: int | None = None) -> PageSummary:
    """Soft-delete the page: its rows stay so `restore_page` can bring it back."""
    return _set_page_state(cx, page_id, DELETE, "page.deleted", base_version)


def restore_page(cx: Context, page_id: UUID, *, base_version: int | None = None) -> PageSummary:
    """Undo archive and delete."""
    return _set_page_state(cx, page_id, RESTORE, "page.restored", base_version)
