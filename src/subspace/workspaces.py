"""Creating workspaces: the tenant boundary that nothing crosses."""

from __future__ import annotations

from subspace.db.pool import Conn
from subspace.models import Actor
from subspace.text import single_line


def create_workspace(conn: Conn, name: str, *, owner: str = "owner") -> Actor:
    """Create a workspace with its owner and its default knowledge base; act as the owner."""
    name = single_line(
        name, what="A workspace name", limit=200, setting="a fixed limit of 200", required=True
    )
    row = conn.execute(
        "with ws as (insert into kb.workspaces (name) values (%s) returning workspace_id),"
        " owner as (insert into kb.users (workspace_id, name) select workspace_id, %s from ws"
        "  returning workspace_id, id),"
        " kb as (insert into kb.knowledge_bases (workspace_id, name, is_default)"
        "  select workspace_id, 'Default', true from ws)"
        " select workspace_id, id as user_id from owner",
        (name, owner),
    ).fetchone()
    assert row is not None
    return Actor(workspace_id=row["workspace_id"], user_id=row["user_id"])
