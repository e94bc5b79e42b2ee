"""/rag-direct: one hybrid search with the question, its top passages quoted, one answer.

A bullet found is quoted with the bullets directly under it: a heading the question's words
find ("Root cause") holds its answer in its children, which share none of those words.
"""

from __future__ import annotations

from uuid import UUID

from subspace.answers import prompts
from subspace.answers import strategy_names as names
from subspace.answers.evidence import Evidence
from subspace.answers.replies import answer_from, raise_if_cancelled
from subspace.answers.sources import hit_texts, run_bullets
from subspace.answers.strategy import Answer, Job
from subspace.db.pool import Conn
from subspace.providers.chat import Message
from subspace.search import registry
from subspace.search.request import SearchRequest
from subspace.search.service import search

PASSAGES = 8  # hits quoted to the model: enough for a question that spans a few bullets
CHILDREN = 8  # bullets quoted under a bullet found: a heading's list, not a whole subtree


class DirectStrategy:
    name = names.DIRECT

    def answer(self, job: Job) -> Answer:
        raise_if_cancelled(job)
        # Questions and earlier answers are found too but are no sources: fetch enough rows
        # that the passages quoted are sources.
        request = SearchRequest(query=job.question, limit=2 * PASSAGES)
        response = search(job.cx, job.searcher, request)
        with job.cx.transaction() as conn:
            asked = run_bullets(conn, job.cx.actor.workspace_id, [r.ref for r in response.rows])
            rows = [row for row in response.rows if row.ref not in asked][:PASSAGES]
            bullets = [row.id for row in rows if row.ref.startswith("node:")]
            under = children(conn, job.cx.actor.workspace_id, bullets)
            # Each hit quoted whole (its bullet, chunk or message), not its search passage:
            # a passage is fragments, and an answer quotes whole sentences.
            whole = hit_texts(conn, job.cx.actor.workspace_id, [row.ref for row in rows])
        job.progress.step(
            "tool",
            f"kb.search {_short(job.question)}: {len(rows)} hits",
            {"tool": "kb.search", "arguments": {"query": job.question}, "ok": True,
             "hits": [row.ref for row in rows]},
        )  # fmt: skip
        evidence = Evidence(job.settings.rag_max_context_chars)
        quoted = []
        for row in rows:
            # A bullet under another that was found is quoted once, as a hit of its own.
            lines = {f"node:{ident}": f"  - {text} (node:{ident})"
                     for ident, text in under.get(row.id, []) if ident not in bullets}  # fmt: skip
            # A paragraph a line: headings and paragraphs stay apart, each sentence whole.
            found = "\n".join(
                " ".join(line.split()) for line in whole.get(row.ref, row.passage).splitlines()
                if line.strip()
            )  # fmt: skip
            text = evidence.take("\n".join([found, *lines.values()]))
            if not text:
                break
            evidence.add(row.ref, row.title)
            # Only the bullets quoted whole become citable; a ref in the stored text does not.
            shown = set(text.splitlines())
            for ref, line in lines.items():
                if line in shown:
                    evidence.add(ref, line.strip().removeprefix("- ").removesuffix(f" ({ref})"))
            place = " › ".join(row.breadcrumb) if row.breadcrumb else row.title
            quoted.append(prompts.fence(row.ref, place, text))
        raise_if_cancelled(job)
        messages = [
            Message("system", prompts.ANSWER_SYSTEM),
            Message("user", prompts.question_message(job.question, quoted)),
        ]
        return answer_from(job, messages, evidence)


def children(
    conn: Conn, workspace_id: UUID, node_ids: list[UUID]
) -> dict[UUID, list[tuple[UUID, str]]]:
    """The first CHILDREN bullets directly under each of `node_ids`, in outline order, as
    (id, text), leaving out those answer runs asked with or wrote (they are no sources). The
    bullets share the page of the bullet found, which the search has just found visible."""
    if not node_ids:
        return {}
    not_asked = registry.get("node").asked_by_run
    assert not_asked is not None
    rows = conn.execute(
        "select parent_id, id, text from (select c.parent_id, c.id, c.text, row_number() "
        "over (partition by c.parent_id order by c.position) as n from kb.nodes c "
        "where c.workspace_id = %(ws)s and c.parent_id = any(%(ids)s) and c.text <> '' "
        f"and not ({not_asked('c')})) c where n <= %(most)s order by parent_id, n",
        {"ws": workspace_id, "ids": node_ids, "most": CHILDREN},
    ).fetchall()
    found: dict[UUID, list[tuple[UUID, str]]] = {}
    for row in rows:
        found.setdefault(row["parent_id"], []).append((row["id"], " ".join(row["text"].split())))
    return found


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
