"""Workspaces, the tenant boundary that nothing crosses: create, list, find, and act as owner."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from subspace.db.locks import WORKSPACE_LOCK_KEY
from subspace.db.pool import Conn
from subspace.errors import Conflict, InvalidInput, NotFound
from subspace.models import Actor
from subspace.text import clean_text, single_line


@dataclass
class Workspace:
    """A workspace with how much it holds (items not deleted, keys not revoked)."""

    id: UUID
    name: str
    created_at: datetime
    knowledge_bases: int
    pages: int
    files: int
    mail: int
    keys: int


def create_workspace(conn: Conn, name: str, *, owner: str = "owner") -> Actor:
    """Create a workspace with its owner and its default knowledge base; act as the owner.

    Names are unique, ignoring case, so a name can stand for its workspace on the CLI.
    """
    name = single_line(
        name, what="A workspace name", limit=200, setting="a fixed limit of 200", required=True
    )
    with conn.transaction():
        conn.execute("select pg_advisory_xact_lock(%s)", (WORKSPACE_LOCK_KEY,))
        taken = conn.execute(
            "select workspace_id from kb.workspaces where lower(name) = lower(%s)", (name,)
        ).fetchone()
        if taken is not None:
            raise Conflict(
                f"A workspace named {name!r} already exists ({taken['workspace_id']}). "
                "Pick another name."
            )
        row = conn.execute(
            "with ws as (insert into kb.workspaces (name) values (%s) returning workspace_id),"
            " owner as (insert into kb.users (workspace_id, name) select workspace_id, %s"
            "  from ws returning workspace_id, id),"
            " kb as (insert into kb.knowledge_bases (workspace_id, name, is_default)"
            "  select workspace_id, 'Default', true from ws)"
            " select workspace_id, id as user_id from owner",
            (name, owner),
        ).fetchone()
    assert row is not None
    return Actor(workspace_id=row["workspace_id"], user_id=row["user_id"])


def list_workspaces(conn: Conn, workspace_id: UUID | None = None) -> list[Workspace]:
    """Every workspace (or only `workspace_id`), oldest first, with its counts."""
    rows = conn.execute(
        "select w.workspace_id as id, w.name, w.created_at,"
        " (select count(*) from kb.knowledge_bases k where k.workspace_id = w.workspace_id)"
        "  as knowledge_bases,"
        " (select count(*) from kb.pages p where p.workspace_id = w.workspace_id"
        "  and p.deleted_at is null) as pages,"
        " (select count(*) from kb.files f where f.workspace_id = w.workspace_id"
        "  and f.deleted_at is null) as files,"
        " (select count(*) from kb.mail m where m.workspace_id = w.workspace_id"
        "  and m.deleted_at is null) as mail,"
        " (select count(*) from kb.api_keys a where a.workspace_id = w.workspace_id"
        "  and a.revoked_at is null) as keys"
        " from kb.workspaces w where %(id)s::uuid is null or w.workspace_id = %(id)s"
        " order by w.created_at, w.workspace_id",
        {"id": workspace_id},
    ).fetchall()
    return [Workspace(**row) for row in rows]


def find_workspace(conn: Conn, spec: str) -> UUID:
    """The workspace `spec` names: its id, or its name ignoring case."""
    wanted = " ".join(clean_text(spec).split())  # as names are stored
    if not wanted:
        raise InvalidInput(
            "The workspace is empty. Give its name or id (see `subspace workspaces list`)."
        )
    try:
        by_id: UUID | None = UUID(wanted)
    except ValueError:
        by_id = None
    row = conn.execute(
        "select workspace_id from kb.workspaces where workspace_id = %s or lower(name) = lower(%s)"
        " order by workspace_id = %s desc limit 1",
        (by_id, wanted, by_id),
    ).fetchone()
    if row is None:
        raise InvalidInput(
            f"No workspace is named {wanted!r} or has that id. See `subspace workspaces list`, "
            "or create it with `subspace workspaces create`."
        )
    found: UUID = row["workspace_id"]
    return found


def workspace_owner(conn: Conn, workspace_id: UUID) -> Actor:
    """The workspace's first user, whom keys made for the workspace act as."""
    row = conn.execute(
        "select id from kb.users where workspace_id = %s order by created_at, id limit 1",
        (workspace_id,),
    ).fetchone()
    if row is None:
        raise NotFound("workspace", workspace_id, scope="on this server")
    return Actor(workspace_id=workspace_id, user_id=row["id"])
