"""File commands: upload, enable or disable, archive, delete and restore."""

from __future__ import annotations

import hashlib
from uuid import UUID

from subspace.commands.blobs import put_blob
from subspace.commands.pages import resolve_kb
from subspace.commands.retry import retried
from subspace.commands.states import ARCHIVE, DELETE, RESTORE, set_state
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import InvalidInput, TooLarge
from subspace.models import File
from subspace.outbox.append import append_event
from subspace.text import single_line

MAX_CONTENT_TYPE_CHARS = 255


def check_upload_size(cx: Context, size: int) -> None:
    """Raise TooLarge when `size` bytes is over the upload limit."""
    limit = cx.settings.max_upload_bytes
    if size > limit:
        raise TooLarge(
            f"The file is {size:,} bytes; the upload limit is {limit:,} bytes "
            "(SUBSPACE_MAX_UPLOAD_BYTES). Upload a smaller file or raise the limit."
        )


@retried
def upload_file(
    cx: Context,
    name: str,
    data: bytes,
    *,
    content_type: str = "application/octet-stream",
    kb_id: UUID | None = None,
    mail_id: UUID | None = None,
) -> File:
    """Store the file's bytes and a file row in status `processing`.

    Text extraction runs later, outside the caller's request, and moves the file to
    `ready` or `failed`.
    """
    name = single_line(
        name,
        what="A file name",
        limit=cx.settings.max_title_chars,
        setting="SUBSPACE_MAX_TITLE_CHARS",
        required=True,
    )
    content_type = single_line(
        content_type or "application/octet-stream",
        what="A content type",
        limit=MAX_CONTENT_TYPE_CHARS,
        setting="a fixed limit",
        required=True,
    )
    if not data:
        raise InvalidInput(f"The file {name!r} is empty (0 bytes). Upload a file with content.")
    check_upload_size(cx, len(data))
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        sha256 = put_blob(conn, cx.actor, data)
        row = conn.execute(
            "insert into kb.files (workspace_id, kb_id, name, content_type, blob_sha256, size, "
            "mail_id) values (%s, %s, %s, %s, %s, %s, %s) returning id",
            (ws, kb, name, content_type, sha256, len(data), mail_id),
        ).fetchone()
        assert row is not None
        append_event(conn, cx.actor.workspace_id, "file.uploaded", file_id=row["id"])
        return queries.get_file(conn, ws, row["id"])


def find_stored_file(
    conn: Conn, workspace_id: UUID, kb_id: UUID, sha256: str, *, include_archived: bool = False
) -> File | None:
    """The oldest file of the knowledge base holding exactly these bytes (by SHA-256), if any.

    Deleted files never count; archived ones only with `include_archived` (re-importing a
    folder must not bring back what someone archived, but an upload should be visible).
    """
    row = conn.execute(
        "select id from kb.files where workspace_id = %s and kb_id = %s and blob_sha256 = %s "
        "and deleted_at is null and (%s or archived_at is null) order by created_at, id limit 1",
        (workspace_id, kb_id, sha256, include_archived),
    ).fetchone()
    return None if row is None else queries.get_file(conn, workspace_id, row["id"])


@retried
def upload_file_once(
    cx: Context,
    name: str,
    data: bytes,
    *,
    content_type: str = "application/octet-stream",
    kb_id: UUID | None = None,
) -> tuple[File, bool]:
    """Store an upload as `upload_file` does, unless the knowledge base already holds a live
    file with the same bytes: then return that file. The flag says it already existed.

    Uploads of the same bytes at the same time wait for each other, so only one is stored.
    """
    sha256 = hashlib.sha256(data).hexdigest()
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        conn.execute(
            "select pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (f"upload:{cx.actor.workspace_id}:{kb}:{sha256}",),
        )
        found = find_stored_file(conn, cx.actor.workspace_id, kb, sha256)
        if found is not None:
            return found, True
        bound = cx.on(conn)
        return upload_file(bound, name, data, content_type=content_type, kb_id=kb), False


def set_file_enabled(cx: Context, file_id: UUID, enabled: bool) -> File:
    """Disable a file to hide it from search, grep, read and RAG; enable it to bring it back."""
    assignment = "enabled = true" if enabled else "enabled = false"
    event = "file.enabled" if enabled else "file.disabled"
    return set_state(cx, "file", file_id, assignment, event, queries.get_file)


def archive_file(cx: Context, file_id: UUID) -> File:
    return set_state(cx, "file", file_id, ARCHIVE, "file.archived", queries.get_file)


def delete_file(cx: Context, file_id: UUID) -> File:
    """Soft-delete the file; its blob and text stay so it can be restored."""
    return set_state(cx, "file", file_id, DELETE, "file.deleted", queries.get_file)


def restore_file(cx: Context, file_id: UUID) -> File:
    return set_state(cx, "file", file_id, RESTORE, "file.restored", queries.get_file)
