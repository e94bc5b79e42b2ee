"""Knowledge base commands."""

from __future__ import annotations

from subspace.commands.retry import retried
from subspace.context import Context
from subspace.db import queries
from subspace.errors import Conflict
from subspace.models import KnowledgeBase
from subspace.outbox.append import append_event
from subspace.text import clean_text, single_line


@retried
def create_knowledge_base(cx: Context, name: str) -> KnowledgeBase:
    """Create a named knowledge base; names are unique within a workspace."""
    name = single_line(
        name,
        what="A knowledge base name",
        limit=200,
        setting="a fixed limit of 200",
        required=True,
    )
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        row = conn.execute(
            "insert into kb.knowledge_bases (workspace_id, name) values (%s, %s) "
            "on conflict (workspace_id, name) do nothing returning id",
            (ws, name),
        ).fetchone()
        if row is None:
            raise Conflict(f"A knowledge base named {name!r} already exists. Pick another name.")
        append_event(conn, cx.actor.workspace_id, "knowledge_base.created", kb_id=row["id"])
        return queries.get_knowledge_base(conn, ws, row["id"])


def find_knowledge_base(cx: Context, name: str) -> KnowledgeBase | None:
    """The knowledge base called `name` (cleaned and trimmed as names are stored), or None."""
    name = " ".join(clean_text(name).split())
    with cx.transaction() as conn:
        for kb in queries.list_knowledge_bases(conn, cx.actor.workspace_id):
            if kb.name == name:
                return kb
    return None
