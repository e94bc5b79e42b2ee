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
# The system's own folders, never a folder of documents (and /proc's files block a read).
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"), Path("/run"))
EDITOR_TEMPORARIES = ("*~", "*.swp", "*.swx", "*.tmp", ".#*", "#*#", "*.part", "*.crdownload")

COLUMNS = (
    "workspace_id, id, kb_id, user_id, kind, name, config, secret is not null as has_secret, "
    "status, status_reason, cursor, last_sync_at, last_counts, failures, created_at, "
    "(select count(*) from kb.source_items i left join kb.files f on i.item_kind = 'file' "
    "and f.workspace_id = i.workspace_id and f.id = i.item_id where i.workspace_id = "
    "s.workspace_id and i.source_id = s.id and (i.error is not null or f.status = 'failed'))"
    " as failed_items"
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
    failed_items: int  # items it could not bring in, or whose text could not be read


def _plain(what: str, value: str) -> str:
    """`value` when it is text Postgres and a person can read: no control characters (a NUL
    cannot be stored) and no lone surrogates (not UTF-8)."""
    bad = next((c for c in value if ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        raise InvalidInput(
            f"{what} holds the character U+{ord(bad):04X}, which it cannot hold: remove it."
        )
    return value


def source_name(name: str) -> str:
    """The name, checked and with its spaces tidied."""
    name = " ".join(_plain("A source's name", name).split())
    if not name or len(name) > MAX_NAME_CHARS:
        raise InvalidInput(f"A source's name must be 1 to {MAX_NAME_CHARS} characters.")
    try:
        UUID(name)
    except ValueError:
        return name
    raise InvalidInput("A source's name cannot be an id (it would name another source).")


def _patterns(what: str, patterns: list[str]) -> list[str]:
    for pattern in patterns:
        _plain(f"A pattern of {what}", pattern)
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
    include, exclude = _patterns("include", include or []), _patterns("exclude", exclude or [])
    types = _types(types or [])
    if not path or len(path) > 4096:
        raise InvalidInput("A folder source needs the folder's path (at most 4,096 characters).")
    _plain("A folder's path", path)
    if not os.path.isabs(path):
        raise InvalidInput(f"Give the folder's absolute path; {path!r} is relative.")
    folder = Path(path).resolve()
    if folder == Path("/") or any(folder.is_relative_to(system) for system in SYSTEM_FOLDERS):
        raise InvalidInput(f"{folder} is the system's, not a folder of documents: choose one.")
    _check_under_roots(folder, roots)
    if not folder.is_dir():
        raise InvalidInput(f"{folder} is not a folder this server can read.")
    return {"path": str(folder), "include": include, "exclude": exclude, "types": types}


def _is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".")
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
    host = _plain("The server's host name", host).strip()
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
    if type(port) is not int or not 1 <= port <= 65_535:
        raise InvalidInput(f"port must be 1 to 65535, not {port!r}.")
    _plain("The user name", user)
    for folder in folders:
        _plain("A folder's name", folder)
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
    if "\0" in password:
        raise InvalidInput("A password cannot hold a NUL character.")
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
    name = source_name(name)
    secret = seal_password(cx.settings, check_password(password or "")) if kind == "imap" else None
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        kb = kb_id or queries.default_knowledge_base(conn, ws).id
        queries.get_knowledge_base(conn, ws, kb)  # NotFound when it is not this workspace's
        if kind == "folder":
            _check_folder_free(conn, ws, kb, Path(config["path"]))
        taken = conn.execute(
            "select 1 from kb.sources where workspace_id = %s and name = %s", (ws, name)
        ).fetchone()
        if taken:
            raise Conflict(f"A source named {name!r} exists already: choose another name.")
        row = conn.execute(
            "insert into kb.sources (workspace_id, kb_id, user_id, kind, name, config, secret) "
            "values (%s, %s, %s, %s, %s, %s, %s) on conflict (workspace_id, name) do nothing "
            "returning id",
            (ws, kb, cx.actor.user_id, kind, name, Jsonb(config), secret),
        ).fetchone()
        if row is None:  # added meanwhile by another writer
            raise Conflict(f"A source named {name!r} exists already: choose another name.")
        notify(conn, row["id"])
        return get_source(conn, ws, row["id"])


def _check_folder_free(conn: Conn, ws: UUID, kb: UUID, folder: Path) -> None:
    """Items from a folder are known by paths that start with its name, so two folders of
    one name, or one inside another, cannot feed one knowledge base."""
    rows = conn.execute(
        "select name, config->>'path' as path from kb.sources "
        "where workspace_id = %s and kb_id = %s and kind = 'folder'",
        (ws, kb),
    ).fetchall()
    for row in rows:
        other = Path(row["path"])
        if other == folder:
            raise Conflict(f"The source {row['name']!r} already follows {folder}.")
        if folder.is_relative_to(other) or other.is_relative_to(folder):
            raise Conflict(
                f"The source {row['name']!r} already follows {other}, and {folder} "
                f"{'is inside it' if folder.is_relative_to(other) else 'holds it'}: a file "
                "of both would belong to each in turn. Add the folder to another knowledge "
                "base, or follow only one of the two."
            )
        folder_name = folder.name
        if other.name == folder_name:
            raise Conflict(
                f"The source {row['name']!r} already feeds this knowledge base from a folder "
                f"named {folder_name!r} ({row['path']}); items are known by paths that start "
                "with the folder's name. Use another knowledge base, or rename one folder."
            )


def list_sources(conn: Conn, ws: UUID) -> list[SyncedSource]:
    rows = conn.execute(
        f"select {COLUMNS} from kb.sources s where workspace_id = %s order by name", (ws,)
    ).fetchall()
    return [SyncedSource(**row) for row in rows]


def get_source(conn: Conn, ws: UUID, name_or_id: str | UUID) -> SyncedSource:
    """A source by its id (a UUID), or by its name or id as typed (a string)."""
    value: UUID | str
    if isinstance(name_or_id, UUID):
        where, value = "id = %s", name_or_id
    else:
        try:
            where, value = "id = %s", UUID(name_or_id)  # a name is never an id (`source_name`)
        except ValueError:
            where, value = "name = %s", name_or_id
    row = conn.execute(
        f"select {COLUMNS} from kb.sources s where workspace_id = %s and {where}", (ws, value)
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
    with cx.transaction() as conn:
        source = get_source(conn, cx.actor.workspace_id, name_or_id)
        if source.kind != "imap":
            raise InvalidInput(f"{source.name!r} is a folder: it has no password.")
        secret = seal_password(cx.settings, check_password(password))
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
