"""File commands: upload, enable or disable, archive, delete and restore."""

from __future__ import annotations

import hashlib
from typing import Literal
from uuid import UUID

from subspace.commands.blobs import put_blob
from subspace.commands.pages import resolve_kb
from subspace.commands.retry import retried
from subspace.commands.sources import find_by_path, replace_file_content
from subspace.commands.states import ARCHIVE, DELETE, RESTORE, set_state
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import InvalidInput, TooLarge
from subspace.models import File
from subspace.outbox.append import append_event
from subspace.text import single_line

MAX_CONTENT_TYPE_CHARS = 255
UploadOutcome = Literal["added", "updated", "existing"]  # what an upload did


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
    source_path: str | None = None,
) -> File:
    """Store the file's bytes and a file row in status `processing`; `source_path` is where
    an imported file came from (commands/sources.py).

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
            "mail_id, source_path) values (%s, %s, %s, %s, %s, %s, %s, %s) returning id",
            (ws, kb, name, content_type, sha256, len(data), mail_id, source_path),
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
) -> tuple[File, UploadOutcome]:
    """Store an upload as `upload_file` does, known by its name as its source path, unless
    the knowledge base already holds a live file with the same bytes (then that file is
    returned, "existing"); a live file uploaded before under the same name gets these bytes
    ("updated", see sources.replace_file_content); otherwise a new file ("added").

    Uploads of the same name or bytes at the same time wait for each other, so only one is
    stored.
    """
    sha256 = hashlib.sha256(data).hexdigest()
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, kb_id)
        # Name first, then bytes: every upload takes the two locks in one order.
        for key in (f"name:{name}", f"bytes:{sha256}"):
            conn.execute(
                "select pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"upload:{ws}:{kb}:{key}",),
            )
        found = find_stored_file(conn, ws, kb, sha256)
        if found is not None:
            return found, "existing"
        bound = cx.on(conn)
        named = find_by_path(conn, ws, kb, "file", name)
        if named is not None and not named.put_away:
            updated = replace_file_content(
                bound, named.id, data, content_type=content_type, source_path=name
            )
            return updated, "updated"
        # A name someone archived stays with that file; this upload is a file of its own.
        path = None if named is not None else name
        added = upload_file(
            bound, name, data, content_type=content_type, kb_id=kb, source_path=path
        )
        return added, "added"


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
