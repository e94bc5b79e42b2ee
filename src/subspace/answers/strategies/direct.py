"""/rag-direct: one hybrid search with the question, its top passages quoted, one answer."""

from __future__ import annotations

from subspace.answers import prompts
from subspace.answers.chat import Message
from subspace.answers.evidence import Evidence
from subspace.answers.replies import answer_from, raise_if_cancelled
from subspace.answers.sources import run_bullets
from subspace.answers.strategy import Answer, Job
from subspace.search.service import SearchRequest, search

PASSAGES = 8  # hits quoted to the model: enough for a question that spans a few bullets


class DirectStrategy:
    name = "rag-direct"

    def answer(self, job: Job) -> Answer:
        raise_if_cancelled(job)
        # Questions and earlier answers are found too but are no sources: fetch enough rows
        # that the passages quoted are sources.
        request = SearchRequest(query=job.question, limit=2 * PASSAGES)
        response = search(job.cx, job.embedder, request)
        with job.cx.transaction() as conn:
            asked = run_bullets(conn, job.cx.actor.workspace_id, [r.ref for r in response.rows])
        rows = [row for row in response.rows if row.ref not in asked][:PASSAGES]
        job.progress.step(
            "tool",
            f"kb.search {_short(job.question)}: {len(rows)} hits",
            {"tool": "kb.search", "arguments": {"query": job.question}, "ok": True,
             "hits": [row.ref for row in rows]},
        )  # fmt: skip
        evidence = Evidence(job.settings.rag_max_context_chars)
        quoted = []
        for row in rows:
            text = evidence.take(row.passage)
            if not text:
                break
            evidence.add(row.ref, row.title)
            quoted.append(prompts.fence(row.ref, row.title, text))
        raise_if_cancelled(job)
        messages = [
            Message("system", prompts.ANSWER_SYSTEM),
            Message("user", prompts.question_message(job.question, quoted)),
        ]
        return answer_from(job, messages, evidence)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
