"""One round of a watched folder's sync: the folder brought into its knowledge base with the
importer (ingest/importer.py), reading only the files whose size or modification time changed
since the last round.

Each file is imported in a transaction of its own and its row in kb.source_items is written
after it, so a round killed at any point loses nothing and duplicates nothing: the next round
finds the item at its path (the importer's identity) and only records it. A file gone from
the folder is archived (restorable), and restored if it comes back; a file gone and one of the
same bytes appearing elsewhere in one round is a move, followed. Files gone are archived only
after a round that walked the whole folder.
"""

from __future__ import annotations

import fnmatch
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from subspace import commands
from subspace.context import Context
from subspace.db.pool import Conn
from subspace.errors import NotFound, SubspaceError
from subspace.ingest.importer import (
    FILE_SUFFIXES,
    MAIL_SUFFIXES,
    MAILBOX_SUFFIXES,
    PAGE_SUFFIXES,
    Importer,
)
from subspace.sources.model import EDITOR_TEMPORARIES, SyncedSource


class SourceFailed(Exception):
    """A round could not run; `reason` says why, for the source's status."""

    def __init__(self, reason: str, *, paused: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.paused = paused  # it needs a person (a key, a password), not a retry


@dataclass(frozen=True)
class Seen:
    """What the last round recorded of a file."""

    size: int | None
    mtime_ns: int | None
    archived: bool
    item_kind: str | None
    error: str | None

    def unchanged(self, status: os.stat_result) -> bool:
        """Whether the file is as this round last read it. A file that became no item and
        did not fail (a copy of another's bytes) is read again: it may be the last copy."""
        read = self.item_kind is not None or self.error is not None
        same = (self.size, self.mtime_ns) == (status.st_size, status.st_mtime_ns)
        return read and same and not self.archived


def _type_of(name: str) -> str | None:
    suffix = os.path.splitext(name)[1].lower()
    if suffix in PAGE_SUFFIXES or not suffix:
        return "page"
    if suffix in FILE_SUFFIXES:
        return "file"
    if suffix in MAIL_SUFFIXES | MAILBOX_SUFFIXES:
        return "mail"
    return None


def _matches(relative: str, patterns: list[str]) -> bool:
    """A pattern without a slash matches a file's name; one with a slash, its path from the
    folder ('drafts/*' matches every file under drafts/)."""
    name = relative.rsplit("/", 1)[-1]
    return any(
        fnmatch.fnmatchcase(relative if "/" in pattern else name, pattern) for pattern in patterns
    )


def folder_files(
    root: Path,
    config: dict[str, object],
    unlisted: list[str] | None = None,
    unread: Counter[str] | None = None,
) -> Iterator[tuple[Path, os.stat_result]]:
    """The files of the folder the source follows, with their status: hidden files and
    folders, symbolic links, editors' temporary files, the excluded and the types not
    followed left out, in a stable order. A folder that cannot be listed is named in
    `unlisted`; files of a type Subspace does not read are counted in `unread`, by suffix."""
    include = list(config.get("include") or [])  # type: ignore[call-overload]
    exclude = list(config.get("exclude") or []) + list(EDITOR_TEMPORARIES)  # type: ignore[call-overload]
    types = set(config.get("types") or [])  # type: ignore[call-overload]

    def unreadable(error: OSError) -> None:
        if unlisted is not None:
            unlisted.append(str(error.filename))

    for folder, folders, files in os.walk(root, onerror=unreadable):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = Path(folder, name)
            relative = path.relative_to(root).as_posix()
            if _matches(relative, exclude) or (include and not _matches(relative, include)):
                continue
            if types and _type_of(name) not in types:
                if unread is not None and _type_of(name) is None:
                    unread[os.path.splitext(name)[1].lower() or "no extension"] += 1
                continue
            try:
                status = path.lstat()
            except OSError:
                continue  # gone between the listing and now: the next round sees it gone
            if path.is_symlink() or not path.is_file():
                continue  # a link could lead out of the folder the source was allowed
            yield path, status


def _seen(conn: Conn, source: SyncedSource) -> dict[str, Seen]:
    rows = conn.execute(
        "select key, size, mtime_ns, archived, item_kind, error from kb.source_items "
        "where workspace_id = %s and source_id = %s",
        (source.workspace_id, source.id),
    ).fetchall()
    return {row.pop("key"): Seen(**row) for row in rows}


def _item_at(
    conn: Conn, source: SyncedSource, path: str, *, live: bool = False
) -> tuple[str, UUID] | None:
    """The page or file of the source's knowledge base that comes from `path` (`live`: and
    is neither archived nor deleted)."""
    state = " and archived_at is null and deleted_at is null" if live else ""
    row = conn.execute(
        "select 'page' as kind, id from kb.pages where workspace_id = %s and kb_id = %s "
        f"and source_path = %s{state} union all "
        "select 'file', id from kb.files where workspace_id = %s and kb_id = %s "
        f"and source_path = %s and mail_id is null{state} limit 1",
        (source.workspace_id, source.kb_id, path) * 2,
    ).fetchone()
    return None if row is None else (row["kind"], row["id"])


def record_item(
    conn: Conn,
    source: SyncedSource,
    key: str,
    *,
    item: tuple[str, UUID | None] | None,
    status: os.stat_result | None = None,
    error: str | None = None,
    archived: bool = False,
) -> None:
    conn.execute(
        "insert into kb.source_items (workspace_id, source_id, key, item_kind, item_id, size, "
        "mtime_ns, error, archived) values (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "on conflict (workspace_id, source_id, key) do update set item_kind = "
        "excluded.item_kind, item_id = excluded.item_id, size = excluded.size, mtime_ns = "
        "excluded.mtime_ns, error = excluded.error, archived = excluded.archived, "
        "synced_at = now()",
        (
            source.workspace_id,
            source.id,
            key,
            item[0] if item else None,
            item[1] if item else None,
            status.st_size if status else None,
            status.st_mtime_ns if status else None,
            error,
            archived,
        ),
    )


def _put_away(cx: Context, kind: str, item_id: UUID, *, restore: bool) -> bool:
    """Archive, or restore, the page or file; False when someone removed it meanwhile."""
    try:
        if kind == "page":
            (commands.restore_page if restore else commands.archive_page)(cx, item_id)
        else:
            (commands.restore_file if restore else commands.archive_file)(cx, item_id)
    except NotFound:
        return False
    return True


def _archived_item(conn: Conn, source: SyncedSource, key: str) -> tuple[str, UUID] | None:
    """The item at `key` when it is archived (and not deleted): the sync archived it when its
    file went, and brings it back now that the file has."""
    row = conn.execute(
        "select i.item_kind as kind, i.item_id as id from kb.source_items i "
        "left join kb.pages p on i.item_kind = 'page' and p.workspace_id = i.workspace_id "
        "and p.id = i.item_id "
        "left join kb.files f on i.item_kind = 'file' and f.workspace_id = i.workspace_id "
        "and f.id = i.item_id "
        "where i.workspace_id = %s and i.source_id = %s and i.key = %s and i.archived "
        "and coalesce(p.archived_at, f.archived_at) is not null "
        "and coalesce(p.deleted_at, f.deleted_at) is null",
        (source.workspace_id, source.id, key),
    ).fetchone()
    return None if row is None else (row["kind"], row["id"])


def sync_folder(
    cx: Context, source: SyncedSource, stop: threading.Event | None = None, *, reread: bool = False
) -> Counter[str]:
    """One round: import what changed, archive what went. Returns the outcomes counted
    (added, updated, moved, archived, restored, failed, skipped, unchanged: files read and
    found the same) and `files`, the files the folder holds. `reread` reads every file, as
    a first round does (the size and time of a file can stay the same through an edit)."""
    root = _checked_root(source)
    base = root.parent
    with cx.transaction() as conn:
        seen = _seen(conn, source)
    importer = Importer(cx, source.kb_id, base=base)
    counts: Counter[str] = Counter()
    present: set[str] = set()
    unlisted: list[str] = []
    unread: Counter[str] = Counter()
    for path, status in folder_files(root, source.config, unlisted, unread):
        if stop is not None and stop.is_set():
            return counts  # nothing archived: the folder was not walked whole
        key = _key(path.relative_to(base).as_posix())
        present.add(key)
        before = seen.get(key)
        if key != path.relative_to(base).as_posix():
            counts["failed"] += 1
            with cx.transaction() as conn:
                error = "its name is not valid UTF-8: rename the file for it to be read"
                record_item(conn, source, key, item=None, status=status, error=error)
            continue
        if not reread and before is not None and before.unchanged(status):
            continue
        counts.update(_import_file(cx, importer, source, path, key, status, before))
    importer.link_pending()
    if not root.is_dir() or str(root) in unlisted:
        raise SourceFailed(f"The folder {root} went during the round; nothing was archived.")
    # A folder that could not be listed is reported; what it holds is not gone.
    hidden = [_key(Path(folder).relative_to(base).as_posix()) + "/" for folder in unlisted]
    with cx.transaction() as conn:
        for key in hidden:
            error = "this folder could not be listed; its files were left as they were"
            record_item(conn, source, key, item=None, error=error)
    if hidden:
        counts["unreadable folders"] = len(hidden)
    counts["archived"] += _archive_gone(cx, source, seen, present | set(hidden), hidden)
    counts["files"] = len(present)
    if unread:  # said, not silently left out: `subspace import` reports them as skipped
        counts["not read"] = unread.total()
    return counts


def _checked_root(source: SyncedSource) -> Path:
    """The source's folder, when it is still one and still where it was added: a folder
    swapped for a link to another is not followed there."""
    root = Path(source.config["path"])
    if not root.is_dir():
        raise SourceFailed(f"The folder {root} is gone or cannot be read by the server.")
    if root.resolve() != root:
        raise SourceFailed(
            f"{root} now leads to {root.resolve()} (a symbolic link took its place): it is "
            "not read there. Put the folder back, or add the other folder as a source."
        )
    return root


def _key(path: str) -> str:
    """A file's path as text Postgres can hold: a name that is not UTF-8 (its undecodable
    bytes kept as surrogates) has those bytes replaced."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(path).decode("utf-8", "replace")
    return path


def _import_file(
    cx: Context,
    importer: Importer,
    source: SyncedSource,
    path: Path,
    key: str,
    status: os.stat_result,
    before: Seen | None,
) -> Counter[str]:
    counts: Counter[str] = Counter()
    if before is not None and before.archived:
        with cx.transaction() as conn:
            archived = _archived_item(conn, source, key)
        if archived is not None and _put_away(cx, *archived, restore=True):
            counts["restored"] += 1
    first = len(importer.report.rows)
    importer.add(path, key)
    rows = importer.report.rows[first:]
    errors = [f"{row.source}: {row.detail}" for row in rows if row.outcome == "failed"]
    for row in rows:
        counts[row.outcome] += 1
    with cx.transaction() as conn:
        item: tuple[str, UUID | None] | None = _item_at(conn, source, key)
        if item is None and any(row.kind == "mail" for row in rows):
            item = ("mail", None)  # messages of a .eml or .mbox: read, and known by Message-ID
        record_item(conn, source, key, item=item, status=status,
                    error="; ".join(errors)[:2000] or None)  # fmt: skip
    return counts


def _archive_gone(
    cx: Context,
    source: SyncedSource,
    seen: dict[str, Seen],
    present: set[str],
    unlisted: list[str],
) -> int:
    """Archive the live items whose files are gone; forget the rows of those that moved.
    Those under a folder that could not be listed (`unlisted`) are left as they are."""
    archived = 0
    for key, before in seen.items():
        if key in present or before.archived or key.startswith(tuple(unlisted)):
            continue
        with cx.transaction() as conn:
            item = _item_at(conn, source, key, live=True)
        try:
            if item is not None and _put_away(cx, *item, restore=False):
                archived += 1
        except SubspaceError:
            item = None  # deleted by someone meanwhile: nothing of ours to keep
        with cx.transaction() as conn:
            if item is None:  # moved (the item follows its bytes), put away, or never one
                conn.execute(
                    "delete from kb.source_items where workspace_id = %s and source_id = %s "
                    "and key = %s",
                    (source.workspace_id, source.id, key),
                )
            else:
                record_item(conn, source, key, item=item, archived=True)
    return archived
