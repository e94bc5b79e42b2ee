"""Sources as rows: a watched folder or an IMAP mailbox that feeds one knowledge base, what it
is set to follow, where its sync stands and what its last round did.

Adding, changing and removing a source notifies SOURCES_CHANNEL, so the process running the
background work (sources/runner.py) starts, wakes or stops its sync at once.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db import queries
from subspace.db.pool import Conn
from subspace.errors import Conflict, Forbidden, InvalidInput, NotFound
from subspace.sources.secrets import seal_password

SOURCES_CHANNEL = "subspace_sources"
SourceType = Literal["folder", "imap"]
TLS_MODES = ("tls", "starttls", "none")
IMAP_PORTS = {"tls": 993, "starttls": 143, "none": 143}
MAX_NAME_CHARS = 100
MAX_PATTERNS = 50
MAX_PATTERN_CHARS = 200
MAX_FOLDERS = 20
MAX_FOLDER_CHARS = 200
MAX_FIELD_CHARS = 320  # a host name or a user name (an address)
MAX_PASSWORD_CHARS = 1000
ITEM_KINDS = ("page", "file", "mail")
# Editors' and browsers' files that stand for another while it is written: a round that met
# one would import, then archive it.
EDITOR_TEMPORARIES = ("*~", "*.swp", "*.swx", "*.tmp", ".#*", "#*#", "*.part", "*.crdownload")

COLUMNS = (
    "workspace_id, id, kb_id, user_id, kind, name, config, secret is not null as has_secret, "
    "status, status_reason, cursor, last_sync_at, last_counts, failures, created_at"
)


@dataclass(frozen=True)
class SyncedSource:
    workspace_id: UUID
    id: UUID
    kb_id: UUID
    user_id: UUID
    kind: SourceType
    name: str
    config: dict[str, Any]
    has_secret: bool
    status: str  # waiting, ok, failed, paused
    status_reason: str | None
    cursor: dict[str, Any]
    last_sync_at: datetime | None
    last_counts: dict[str, int]
    failures: int
    created_at: datetime


def _name(name: str) -> str:
    name = " ".join(name.split())
    if not name or len(name) > MAX_NAME_CHARS:
        raise InvalidInput(f"A source's name must be 1 to {MAX_NAME_CHARS} characters.")
    return name


def _patterns(what: str, patterns: list[str]) -> list[str]:
    if len(patterns) > MAX_PATTERNS or any(
        not p.strip() or len(p) > MAX_PATTERN_CHARS for p in patterns
    ):
        raise InvalidInput(
            f"{what} takes at most {MAX_PATTERNS} patterns of 1 to {MAX_PATTERN_CHARS} "
            "characters, such as '*.md' or 'drafts/*'."
        )
    return [p.strip() for p in patterns]


def _types(types: list[str]) -> list[str]:
    unknown = sorted(set(types) - set(ITEM_KINDS))
    if unknown:
        raise InvalidInput(f"Unknown item types {unknown}: choose among {list(ITEM_KINDS)}.")
    return sorted(set(types)) or list(ITEM_KINDS)


def _check_under_roots(folder: Path, roots: str | None) -> None:
    """A folder added over the API must lie under SUBSPACE_FOLDER_ROOTS (None: the command
    line, acting with its user's own rights)."""
    if roots is None:
        return
    allowed = [Path(root).resolve() for root in roots.split(os.pathsep) if root.strip()]
    if not allowed:
        raise Forbidden(
            "Watched folders can be added here only under SUBSPACE_FOLDER_ROOTS, which is not "
            "set: set it on the server, or add the folder with `subspace sources add folder`."
        )
    if not any(folder == root or folder.is_relative_to(root) for root in allowed):
        raise Forbidden(
            f"{folder} is not under SUBSPACE_FOLDER_ROOTS ({', '.join(map(str, allowed))})."
        )


def folder_config(
    path: str,
    *,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
    types: list[str] | None = None,
    roots: str | None = None,
) -> dict[str, Any]:
    """A folder source's settings, checked: an existing folder, given as an absolute path
    (a relative one would mean another folder to each process)."""
    if not path or len(path) > 4096 or "\0" in path:
        raise InvalidInput("A folder source needs the folder's path (at most 4,096 characters).")
    if not os.path.isabs(path):
        raise InvalidInput(f"Give the folder's absolute path; {path!r} is relative.")
    folder = Path(path).resolve()
    _check_under_roots(folder, roots)
    if not folder.is_dir():
        raise InvalidInput(f"{folder} is not a folder this server can read.")
    return {
        "path": str(folder),
        "include": _patterns("include", include or []),
        "exclude": _patterns("exclude", exclude or []),
        "types": _types(types or []),
    }


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def imap_config(
    host: str, *, user: str, folders: list[str], port: int | None = None, tls: str = "tls"
) -> dict[str, Any]:
    """A mailbox source's settings, checked; the password is kept apart (`seal_password`)."""
    host = host.strip()
    if not host or len(host) > MAX_FIELD_CHARS or any(c.isspace() for c in host):
        raise InvalidInput("An IMAP source needs the server's host name, such as imap.example.org.")
    if tls not in TLS_MODES:
        raise InvalidInput(f"tls must be one of {list(TLS_MODES)}, not {tls!r}.")
    if tls == "none" and not _is_loopback(host):
        raise InvalidInput(
            f"{host} is not this machine: a password is sent to it only over TLS. Use tls "
            "(port 993) or starttls (port 143)."
        )
    port = IMAP_PORTS[tls] if port is None else port
    if not isinstance(port, int) or not 1 <= port <= 65_535:
        raise InvalidInput(f"port must be 1 to 65535, not {port!r}.")
    if not user or len(user) > MAX_FIELD_CHARS:
        raise InvalidInput(f"An IMAP source needs the user name (at most {MAX_FIELD_CHARS}).")
    folders = list(dict.fromkeys(f.strip() for f in folders if f.strip())) or ["INBOX"]
    if len(folders) > MAX_FOLDERS or any(len(f) > MAX_FOLDER_CHARS for f in folders):
        raise InvalidInput(
            f"Follow at most {MAX_FOLDERS} folders, each named in at most "
            f"{MAX_FOLDER_CHARS} characters."
        )
    return {"host": host, "port": port, "tls": tls, "user": user, "folders": folders}


def check_password(password: str) -> str:
    if not password or len(password) > MAX_PASSWORD_CHARS:
        raise InvalidInput(
            f"An IMAP source needs the password or app token (at most {MAX_PASSWORD_CHARS} "
            "characters)."
        )
    return password


def notify(conn: Conn, source_id: UUID) -> None:
    """Tell the background work that this source was added, changed or asked to sync."""
    conn.execute("select pg_notify(%s, %s)", (SOURCES_CHANNEL, str(source_id)))


@retried
def add_source(
    cx: Context,
    name: str,
    kind: SourceType,
    config: dict[str, Any],
    *,
    kb_id: UUID | None = None,
    password: str | None = None,
) -> SyncedSource:
    """Keep a new source; its first sync starts in the background work at once."""
    name = _name(name)
    secret = seal_password(cx.settings, check_password(password or "")) if kind == "imap" else None
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = kb_id or queries.default_knowledge_base(conn, ws).id
        queries.get_knowledge_base(conn, ws, kb)  # NotFound when it is not this workspace's
        taken = conn.execute(
            "select 1 from kb.sources where workspace_id = %s and name = %s", (ws, name)
        ).fetchone()
        if taken:
            raise Conflict(f"A source named {name!r} exists already: choose another name.")
        if kind == "folder":
            _check_folder_name_free(conn, ws, kb, Path(config["path"]).name)
        row = conn.execute(
            f"insert into kb.sources (workspace_id, kb_id, user_id, kind, name, config, secret) "
            f"values (%s, %s, %s, %s, %s, %s, %s) on conflict (workspace_id, name) do nothing "
            f"returning {COLUMNS}",
            (ws, kb, cx.actor.user_id, kind, name, Jsonb(config), secret),
        ).fetchone()
        if row is None:  # added meanwhile by another writer
            raise Conflict(f"A source named {name!r} exists already: choose another name.")
        notify(conn, row["id"])
    return SyncedSource(**row)


def _check_folder_name_free(conn: Conn, ws: UUID, kb: UUID, folder_name: str) -> None:
    """Items from a folder are known by paths that start with its name, so two folders of
    one name cannot feed one knowledge base."""
    rows = conn.execute(
        "select name, config->>'path' as path from kb.sources "
        "where workspace_id = %s and kb_id = %s and kind = 'folder'",
        (ws, kb),
    ).fetchall()
    for row in rows:
        if Path(row["path"]).name == folder_name:
            raise Conflict(
                f"The source {row['name']!r} already feeds this knowledge base from a folder "
                f"named {folder_name!r} ({row['path']}); items are known by paths that start "
                "with the folder's name. Use another knowledge base, or rename one folder."
            )


def list_sources(conn: Conn, ws: UUID) -> list[SyncedSource]:
    rows = conn.execute(
        f"select {COLUMNS} from kb.sources where workspace_id = %s order by name", (ws,)
    ).fetchall()
    return [SyncedSource(**row) for row in rows]


def get_source(conn: Conn, ws: UUID, name_or_id: str | UUID) -> SyncedSource:
    """A source by its id or its name."""
    try:
        source_id: UUID | None = UUID(str(name_or_id))
    except ValueError:
        source_id = None
    row = conn.execute(
        f"select {COLUMNS} from kb.sources where workspace_id = %s and (id = %s or name = %s)",
        (ws, source_id, str(name_or_id)),
    ).fetchone()
    if row is None:
        raise NotFound(
            "source",
            name_or_id,
            message=f"No source named {str(name_or_id)!r} in this workspace, nor with that id.",
        )
    return SyncedSource(**row)


def sealed_password(conn: Conn, source: SyncedSource) -> bytes | None:
    row = conn.execute(
        "select secret from kb.sources where workspace_id = %s and id = %s",
        (source.workspace_id, source.id),
    ).fetchone()
    return None if row is None else row["secret"]


@retried
def set_password(cx: Context, name_or_id: str | UUID, password: str) -> SyncedSource:
    """Keep a new password for an IMAP source (sealed with today's key) and sync again."""
    secret = seal_password(cx.settings, check_password(password))
    with cx.transaction() as conn:
        source = get_source(conn, cx.actor.workspace_id, name_or_id)
        if source.kind != "imap":
            raise InvalidInput(f"{source.name!r} is a folder: it has no password.")
        conn.execute(
            "update kb.sources set secret = %s, status = 'waiting', status_reason = null, "
            "failures = 0, updated_at = now() where workspace_id = %s and id = %s",
            (secret, source.workspace_id, source.id),
        )
        notify(conn, source.id)
        return get_source(conn, source.workspace_id, source.id)


@retried
def request_sync(cx: Context, name_or_id: str | UUID) -> SyncedSource:
    """Ask the background work to sync the source now."""
    with cx.transaction() as conn:
        source = get_source(conn, cx.actor.workspace_id, name_or_id)
        notify(conn, source.id)
        return source


@retried
def remove_source(cx: Context, name_or_id: str | UUID) -> SyncedSource:
    """Stop following the source. What it brought in stays in the knowledge base: removing a
    source forgets where items came from, never the items."""
    with cx.transaction() as conn:
        source = get_source(conn, cx.actor.workspace_id, name_or_id)
        conn.execute(
            "delete from kb.sources where workspace_id = %s and id = %s",
            (source.workspace_id, source.id),
        )
        notify(conn, source.id)
        return source


@dataclass(frozen=True)
class ItemError:
    key: str
    error: str


def item_errors(conn: Conn, source: SyncedSource, limit: int = 50) -> list[ItemError]:
    """The items of the source that failed, and why, the latest first: those it could not
    bring in, and files brought in whose text could not be extracted."""
    rows = conn.execute(
        "select i.key, coalesce(i.error, f.status_reason) as error from kb.source_items i "
        "left join kb.files f on i.item_kind = 'file' and f.workspace_id = i.workspace_id "
        "and f.id = i.item_id where i.workspace_id = %s and i.source_id = %s "
        "and (i.error is not null or f.status = 'failed') "
        "order by i.synced_at desc, i.key limit %s",
        (source.workspace_id, source.id, limit),
    ).fetchall()
    return [ItemError(**row) for row in rows]


def record_round(conn: Conn, source: SyncedSource, counts: dict[str, int]) -> None:
    conn.execute(
        "update kb.sources set status = 'ok', status_reason = null, failures = 0, "
        "last_sync_at = now(), last_counts = %s, updated_at = now() "
        "where workspace_id = %s and id = %s",
        (Jsonb(counts), source.workspace_id, source.id),
    )


def record_failed_round(
    conn: Conn, source: SyncedSource, reason: str, *, paused: bool = False
) -> None:
    conn.execute(
        "update kb.sources set status = %s, status_reason = %s, failures = failures + 1, "
        "last_sync_at = now(), updated_at = now() where workspace_id = %s and id = %s",
        ("paused" if paused else "failed", reason[:2000], source.workspace_id, source.id),
    )


def all_source_ids(conn: Conn) -> list[tuple[UUID, UUID]]:
    """Every source of every workspace, as (workspace, id): what the background work syncs."""
    rows = conn.execute("select workspace_id, id from kb.sources order by created_at").fetchall()
    return [(row["workspace_id"], row["id"]) for row in rows]
