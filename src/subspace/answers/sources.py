"""Which retrieved bullets may be cited. Search finds the bullets that ask questions
("/rag …") and the answers runs wrote, as it finds any bullet, but neither is a source: a
question is not evidence for its own answer, and an earlier answer only restates what it
cited (its refs lead to the sources themselves)."""

from __future__ import annotations

from uuid import UUID

from subspace.db.pool import Conn


def run_bullets(conn: Conn, workspace_id: UUID, refs: list[str]) -> set[str]:
    """The refs among `refs` that name a bullet a run asked with or wrote."""
    node_ids = [ref.removeprefix("node:") for ref in refs if ref.startswith("node:")]
    if not node_ids:
        return set()
    rows = conn.execute(
        "select 'node:' || n.id as ref from kb.nodes n "
        "where n.workspace_id = %(ws)s and n.id::text = any(%(ids)s) "
        "and (n.props ? 'run' or exists (select 1 from kb.runs r "
        "     where r.workspace_id = n.workspace_id and r.node_id = n.id))",
        {"ws": workspace_id, "ids": node_ids},
    ).fetchall()
    return {row["ref"] for row in rows}
