"""Which retrieved bullets may be cited. Search finds the bullets that ask questions
("/rag …") and the answers runs wrote, as it finds any bullet, but neither is a source: a
question is not evidence for its own answer, and an earlier answer only restates what it
cited (its refs lead to the sources themselves)."""

from __future__ import annotations

from uuid import UUID

from subspace.answers.evidence import printed_ref
from subspace.context import Context
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


def without_run_bullets(cx: Context, text: str) -> str:
    """A tool's result without the lines of bullets runs asked with or wrote, so the model
    reads sources only (and a question does not take a source's place in its budget)."""
    lines = text.splitlines()
    refs = [printed_ref(line) for line in lines]
    with cx.transaction() as conn:
        dropped = run_bullets(conn, cx.actor.workspace_id, [ref for ref in refs if ref])
    if not dropped:
        return text
    return "\n".join(line for line, ref in zip(lines, refs, strict=True) if ref not in dropped)
