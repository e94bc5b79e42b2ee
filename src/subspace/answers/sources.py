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


def hit_texts(conn: Conn, workspace_id: UUID, refs: list[str]) -> dict[str, str]:
    """The whole text of each hit that `refs` name, as a reader sees it (a bullet's Markdown
    through search.passage_text, a file chunk's text, a mail's own words, a page's title), so an
    answer quotes whole sentences rather than a search passage's fragments. A ref of another
    shape, or one not found, is left out."""
    ids: dict[str, list[str]] = {"node": [], "file": [], "mail": [], "page": []}
    chunks: list[tuple[str, int]] = []
    for ref in refs:
        kind, _, rest = ref.partition(":")
        if kind == "file" and rest.count(":") == 1:
            file_id, n = rest.split(":")
            chunks.append((file_id, int(n)))
        elif kind in ids and rest:
            ids[kind].append(rest)
    rows = conn.execute(
        "select 'node:' || id as ref, search.passage_text(text) as text from kb.nodes "
        "where workspace_id = %(ws)s and id::text = any(%(node)s) "
        "union all select 'mail:' || id, body_text from kb.mail "
        "where workspace_id = %(ws)s and id::text = any(%(mail)s) "
        "union all select 'page:' || id, title from kb.pages "
        "where workspace_id = %(ws)s and id::text = any(%(page)s) "
        "union all select 'file:' || c.file_id || ':' || c.n, c.text from search.file_chunks c "
        "join unnest(%(files)s::text[], %(ns)s::int[]) as w (file_id, n) "
        "on c.file_id::text = w.file_id and c.n = w.n where c.workspace_id = %(ws)s",
        {
            "ws": workspace_id,
            "node": ids["node"],
            "mail": ids["mail"],
            "page": ids["page"],
            "files": [f for f, _ in chunks],
            "ns": [n for _, n in chunks],
        },
    ).fetchall()
    return {row["ref"]: row["text"] for row in rows if row["text"] and row["text"].strip()}
