"""Imported items known by where they came from: finding a page or file by its source path
(or its bytes), and bringing it up to date in place when its file changed or moved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from subspace.commands.blobs import put_blob
from subspace.commands.nodes import node_text
from subspace.commands.pages import page_title
from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.ingest.bullet_diff import Bullet, plan_bullets
from subspace.ingest.outline import OutlineItem
from subspace.models import File, PageSummary
from subspace.outbox.append import append_event

SourceKind = Literal["page", "file"]
_TABLES = {"page": "kb.pages", "file": "kb.files"}
_HASH = {"page": "source_sha256", "file": "blob_sha256"}


@dataclass(frozen=True)
class Known:
    """An item imported before: its id, the bytes and path it came from, and whether someone
    put it away (archived or deleted), which importing again never undoes."""

    id: UUID
    sha256: str | None
    source_path: str | None
    put_away: bool
    failure: str | None  # why a file's text cannot be read, if it cannot


def find_by_path(conn: Conn, ws: UUID, kb_id: UUID, kind: SourceKind, path: str) -> Known | None:
    """The page or file of the knowledge base imported from `path`, in any state."""
    rows = _known(conn, ws, kb_id, kind, "source_path = %s", path)
    return rows[0] if rows else None


def find_by_content(
    conn: Conn, ws: UUID, kb_id: UUID, kind: SourceKind, sha256: str
) -> list[Known]:
    """The live pages or files of the knowledge base made from these bytes, oldest first
    (mail attachments are not imported files and never count)."""
    return [
        known
        for known in _known(conn, ws, kb_id, kind, f"{_HASH[kind]} = %s", sha256)
        if not known.put_away
    ]


def _known(
    conn: Conn, ws: UUID, kb_id: UUID, kind: SourceKind, where: str, value: str
) -> list[Known]:
    attachments = " and mail_id is null" if kind == "file" else ""
    failure = "status_reason" if kind == "file" else "null::text"
    rows = conn.execute(
        f"select id, {_HASH[kind]} as sha256, source_path, {failure} as failure, "
        "(archived_at is not null or deleted_at is not null) as put_away "
        f"from {_TABLES[kind]} where workspace_id = %s and kb_id = %s and {where}{attachments} "
        "order by created_at, id",
        (ws, kb_id, value),
    ).fetchall()
    return [Known(**row) for row in rows]


def missing_sources(
    cx: Context, kb_id: UUID, prefix: str, seen: list[str]
) -> list[tuple[SourceKind, str]]:
    """The live pages and files imported from a path under `prefix` that is not in `seen`."""
    with cx.transaction() as conn:
        rows = conn.execute(
            "select kind, source_path from ("
            " select 'page' as kind, source_path, archived_at, deleted_at, workspace_id, kb_id"
            " from kb.pages union all"
            " select 'file', source_path, archived_at, deleted_at, workspace_id, kb_id"
            " from kb.files where mail_id is null) s "
            "where workspace_id = %s and kb_id = %s and archived_at is null "
            "and deleted_at is null and starts_with(source_path, %s) "
            "and source_path <> all(%s) order by source_path",
            (cx.actor.workspace_id, kb_id, prefix, seen),
        ).fetchall()
    return [(row["kind"], row["source_path"]) for row in rows]


@retried
def set_source_path(cx: Context, kind: SourceKind, item_id: UUID, path: str) -> None:
    """Record that the item now comes from `path` (its file moved, or it was imported before
    paths were kept). Changes nothing search reads, so no event."""
    with cx.transaction() as conn:
        conn.execute(
            f"update {_TABLES[kind]} set source_path = %s where workspace_id = %s and id = %s",
            (path, cx.actor.workspace_id, item_id),
        )


@retried
def update_page_from_outline(
    cx: Context,
    page_id: UUID,
    title: str,
    items: list[OutlineItem],
    *,
    source_sha256: str,
    source_path: str,
) -> PageSummary:
    """Make the page hold `items` again, as its file now reads: bullets that did not change
    keep their ids (and embeddings, tags and links), edited ones keep their ids with new text,
    the rest are added or deleted (see ingest/bullet_diff.py). The file wins: a bullet added in
    the app that the file does not hold is deleted with the others."""
    title = page_title(cx, title)
    items = _cleaned(cx, items)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        page = queries.get_page(conn, ws, page_id, lock=True)
        stored = [
            Bullet(**row)
            for row in conn.execute(
                "select id, parent_id, position, text from kb.nodes "
                "where workspace_id = %s and page_id = %s",
                (ws, page_id),
            ).fetchall()
        ]
        plan = plan_bullets(stored, items)
        conn.execute(
            "update kb.pages set title = %s, source_sha256 = %s, source_path = %s, "
            "updated_at = now(), version = version + 1 where workspace_id = %s and id = %s",
            (title, source_sha256, source_path, ws, page_id),
        )
        if plan.added:
            with conn.cursor().copy(
                "copy kb.nodes (workspace_id, id, page_id, parent_id, position, text) from stdin"
            ) as copy:
                for b in plan.added:
                    copy.write_row((ws, b.id, page_id, b.parent_id, b.position, b.text))
        changed = set(plan.edited) | set(plan.moved)
        rewritten = [b for b in plan.kept if b.id in changed]
        if rewritten:
            # Parents first: a kept bullet may move under one just added, and only then may
            # its old parent be deleted without taking it along.
            conn.execute(
                "update kb.nodes n set parent_id = v.parent_id, position = v.position, "
                "text = v.text, updated_at = case when n.text is distinct from v.text "
                "then now() else n.updated_at end "
                "from unnest(%s::uuid[], %s::uuid[], %s::int[], %s::text[]) "
                "as v (id, parent_id, position, text) "
                "where n.workspace_id = %s and n.id = v.id",
                (
                    [b.id for b in rewritten],
                    [b.parent_id for b in rewritten],
                    [b.position for b in rewritten],
                    [b.text for b in rewritten],
                    ws,
                ),
            )
        if plan.deleted:
            conn.execute(
                "delete from kb.nodes where workspace_id = %s and id = any(%s)",
                (ws, plan.deleted),
            )
            append_event(conn, ws, "nodes.deleted", page_id=page_id, deleted_node_ids=plan.deleted)
        if written := [b.id for b in plan.added] + plan.edited:
            append_event(conn, ws, "nodes.changed", page_id=page_id, node_ids=written)
        edited = set(plan.edited)
        if moved := [i for i in plan.moved if i not in edited]:
            append_event(conn, ws, "nodes.moved", page_id=page_id, node_ids=moved)
        if title != page.title:
            append_event(conn, ws, "page.renamed", page_id=page_id)
        return queries.get_page(conn, ws, page_id)


def _cleaned(cx: Context, items: list[OutlineItem]) -> list[OutlineItem]:
    """The outline with each text as a bullet stores it, so unchanged text compares equal."""
    return [OutlineItem(node_text(cx, item.text), _cleaned(cx, item.children)) for item in items]


@retried
def replace_file_content(
    cx: Context, file_id: UUID, data: bytes, *, content_type: str, source_path: str
) -> File:
    """Give the file new bytes: its text is extracted again (status `processing`, out of
    search until then, as a new upload is). Its id, name, tags and state stay, and chunks whose
    text did not change keep their embeddings."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        queries.get_file(conn, ws, file_id)
        sha256 = put_blob(conn, cx.actor, data)
        conn.execute(
            "update kb.files set blob_sha256 = %s, size = %s, content_type = %s, "
            "source_path = %s, status = 'processing', status_reason = null, updated_at = now() "
            "where workspace_id = %s and id = %s",
            (sha256, len(data), content_type, source_path, ws, file_id),
        )
        append_event(conn, ws, "file.uploaded", file_id=file_id)
        return queries.get_file(conn, ws, file_id)
