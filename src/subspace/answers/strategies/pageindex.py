"""/rag-pageindex: the model reads the tree of pages (titles and outlines, no vectors, no
search), chooses the pages likely to hold the answer, reads them whole, then answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from subspace.agents.tools import call_tool
from subspace.answers import prompts
from subspace.answers import strategy_names as names
from subspace.answers.evidence import Evidence, ref_regex
from subspace.answers.extractive import content_words
from subspace.answers.replies import answer_from, ask_model, not_found, raise_if_cancelled
from subspace.answers.sources import without_run_bullets
from subspace.answers.strategy import Answer, Job
from subspace.context import Context
from subspace.errors import SubspaceError
from subspace.providers.chat import Message
from subspace.search import registry
from subspace.search.filters import page_visible

OUTLINE_BULLETS = 8  # top-level bullets shown per page: the outline, not the page
OUTLINE_BULLET_CHARS = 120
MAX_PAGES_LISTED = 500  # most recently edited first; beyond this the tree is cut
PAGES_READ = 3


@dataclass
class PageOutline:
    """What pageindex reasons over for one item: a page's title and first bullets, a file's
    title and the headings of its first chunks, a mail's subject and its first lines."""

    id: UUID
    title: str
    bullets: list[str]
    kind: str = "page"  # page, file or mail: the ref it is read by

    @property
    def ref(self) -> str:
        return f"{self.kind}:{self.id}"


class PageIndexStrategy:
    name = names.PAGEINDEX

    def answer(self, job: Job) -> Answer:
        raise_if_cancelled(job)
        outlines = visible_outlines(job.cx)
        job.progress.step(
            "tool",
            f"Listed {len(outlines)} pages with their outlines",
            {"tool": "outline", "ok": True, "pages": len(outlines)},
        )
        # The outlines get half the budget: the pages chosen must still fit.
        choosing = Evidence(job.settings.rag_max_context_chars // 2)
        quoted = []
        for outline in outlines:
            text = choosing.take("\n".join(f"- {b}" for b in outline.bullets) or "(empty page)")
            if not text:
                break
            choosing.add(outline.ref, outline.title or "Untitled")
            quoted.append(prompts.fence(outline.ref, outline.title or "Untitled", text))
        raise_if_cancelled(job)
        reply, _ = ask_model(
            job,
            [
                Message("system", prompts.CHOOSE_SYSTEM),
                Message("user", prompts.question_message(job.question, quoted)),
            ],
            Evidence(0),  # the choice is not an answer: nothing of it becomes a bullet
        )
        chosen = [r for r in _refs(reply.content) if choosing.has(r)][:PAGES_READ]
        job.progress.step(
            "tool",
            f"Chose {len(chosen)} pages to read",
            {"tool": "choose", "ok": True, "pages": chosen},
        )
        titles = dict(choosing.closest(len(choosing.titles)))
        if not chosen:
            return not_found(job, _closest(job.question, outlines))
        evidence = Evidence(job.settings.rag_max_context_chars - sum(map(len, quoted)))
        read = []
        for ref in chosen:
            raise_if_cancelled(job)
            try:
                output = call_tool(job.cx, job.searcher, "kb.read", {"ref": ref})
                output = without_run_bullets(job.cx, output)
            except SubspaceError as exc:  # the page went away since the outline
                data = {"tool": "kb.read", "arguments": {"ref": ref}, "ok": False}
                job.progress.step("tool", f"kb.read {ref}: {exc.message}", data)
                continue
            text = evidence.take(output)
            evidence.add_text(text)
            job.progress.step("tool", f"kb.read {ref}: {titles.get(ref, '')}",
                              {"tool": "kb.read", "arguments": {"ref": ref}, "ok": True,
                               "chars": len(text)})  # fmt: skip
            if text:
                read.append(prompts.fence(ref, titles.get(ref, ""), text))
        messages = [
            Message("system", prompts.ANSWER_SYSTEM),
            Message("user", prompts.question_message(job.question, read)),
        ]
        return answer_from(job, messages, evidence)


def _refs(text: str) -> list[str]:
    refs: list[str] = []
    for match in ref_regex().finditer(text):
        ref = match.group(0).lower()
        if ref not in refs:
            refs.append(ref)
    return refs


def _closest(question: str, outlines: list[PageOutline]) -> list[tuple[str, str]]:
    wanted = content_words(question)
    scored = [
        (len(wanted & content_words(" ".join([o.title, *o.bullets]))), -i, o)
        for i, o in enumerate(outlines)
    ]
    best = sorted((s for s in scored if s[0] > 0), key=lambda s: (s[0], s[1]), reverse=True)
    return [(o.ref, o.title or "Untitled") for _, _, o in best[:3]]


def visible_outlines(cx: Context) -> list[PageOutline]:
    """Every page, file and mail the actor may see, most recently changed first, each with its
    first lines (cut to OUTLINE_BULLET_CHARS): a page's top-level bullets, a file's headings, a
    mail's first lines. The tree pageindex reasons over. Questions asked of the workspace are not
    listed, nor a page that holds nothing else."""
    params: dict[str, Any] = {
        "ws": cx.actor.workspace_id,
        "user": cx.actor.user_id,
        "pages": MAX_PAGES_LISTED,
        "bullets": OUTLINE_BULLETS,
        "chars": OUTLINE_BULLET_CHARS,
    }
    files, mail = registry.get("file").item, registry.get("mail").item
    with cx.transaction() as conn:
        rows = conn.execute(
            "select * from ("
            "select 'page' as kind, p.id, p.title, p.updated_at, coalesce(b.texts, '{}') as texts "
            "from kb.pages p "
            "left join lateral (select array_agg(left(n.text, %(chars)s) order by n.position) "
            "as texts from (select text, position from kb.nodes n where n.workspace_id = "
            "p.workspace_id and n.page_id = p.id and n.parent_id is null and n.text <> '' "
            "and not n.props ? 'run' "
            "order by n.position limit %(bullets)s) n) b on true "
            f"where p.workspace_id = %(ws)s and {page_visible('p')} "
            # The workspace's own questions are no source: a page of nothing but questions
            # asked of it (the Questions page) is left out, and so are asked bullets.
            "and (not exists (select 1 from kb.nodes q where q.workspace_id = p.workspace_id "
            "and q.page_id = p.id and q.parent_id is null and q.props ? 'run') "
            "or exists (select 1 from kb.nodes o where o.workspace_id = p.workspace_id "
            "and o.page_id = p.id and o.parent_id is null and not o.props ? 'run')) "
            # A file by its title and the headings its chunks start under, a mail by its
            # subject and its first lines: documents and mail are read as pages are.
            "union all select 'file', f.id, f.label, f.updated_at, coalesce(h.texts, '{}') "
            "from kb.files f left join lateral (select array_agg(left(t, %(chars)s)) as texts "
            "from (select distinct on (t) t, n from (select array_to_string(c.headings, ' › ') "
            "as t, c.n from search.file_chunks c where c.workspace_id = f.workspace_id and "
            "c.file_id = f.id and cardinality(c.headings) > 0) x order by t, n) d "
            "where d.n < 64 limit %(bullets)s) h on true "
            f"where f.workspace_id = %(ws)s and {files.visible('f')} "
            "union all select 'mail', m.id, m.subject, m.updated_at, "
            "array_remove(array[left(m.snippet, %(chars)s)], '') from kb.mail m "
            f"where m.workspace_id = %(ws)s and {mail.visible('m')}"
            ") o order by updated_at desc, id limit %(pages)s",
            params,
        ).fetchall()
    return [
        PageOutline(r["id"], r["title"] or "", [" ".join(t.split()) for t in r["texts"]],
                    r["kind"])
        for r in rows
    ]  # fmt: skip
