"""A judged workspace: a folder of pages, files and mail, the bullets to mark as memories, and
queries whose relevant items are named as a person would name them.

    judgments.jsonl   one query a line: {"id", "style", "query", "relevant": [target, ...]},
                      and for a question the "fact" its answer must state: [phrasing, ...]
    memories.txt      one fragment a line: the bullet holding it becomes a memory
    workspace/        imported as `subspace import` imports a folder

A target names one item: {"page": title}, {"bullet": fragment}, {"memory": fragment},
{"file": name} or {"mail": subject}, with an optional "grade" (default 1). A fragment is part
of the text of exactly one bullet (case aside). Names are resolved to ids after the import; an
empty "relevant" list says that nothing should come back. A fact is one or more alternative
phrasings (`evaluation.answers` says how an answer is checked against them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput
from subspace.evaluation.loaded import Loaded
from subspace.ingest.importer import finish_extraction, import_path

JUDGMENTS = "judgments.jsonl"
MEMORIES = "memories.txt"
WORKSPACE = "workspace"
TARGET_KINDS = ("page", "bullet", "memory", "file", "mail")
# How people type into the palette; the last two must find nothing.
STYLES = ("title", "fragment", "identifier", "person", "typo", "question", "gibberish", "absent")
UNANSWERABLE = {"gibberish", "absent"}
METRICS = ("success@1", "ndcg@10", "not_empty", "empty")
DEPTH = 10  # rows kept per query: the first page at the default limit, what a person sees


@dataclass(frozen=True)
class Target:
    kind: str  # one of TARGET_KINDS
    name: str  # a title, a fragment of a bullet, a file name or a subject
    grade: int = 1


@dataclass(frozen=True)
class JudgedQuery:
    id: str
    style: str
    text: str
    relevant: tuple[Target, ...]  # empty: nothing should come back
    fact: tuple[str, ...] = ()  # phrasings an answer to it must hold one of; () for no check


@dataclass(frozen=True)
class JudgedWorkspace:
    name: str
    workspace: Path
    memories: tuple[str, ...]
    queries: tuple[JudgedQuery, ...]


def is_judged_workspace(folder: Path) -> bool:
    return (folder / JUDGMENTS).is_file()


def read_judged_workspace(folder: Path) -> JudgedWorkspace:
    """The set in `folder`, checked for form; InvalidInput names the line that is wrong."""
    for path, what in ((folder / JUDGMENTS, "file"), (folder / WORKSPACE, "folder")):
        if not (path.is_file() if what == "file" else path.is_dir()):
            raise InvalidInput(
                f"{path} is missing. A judged workspace has {JUDGMENTS}, an optional "
                f"{MEMORIES} and a {WORKSPACE}/ folder to import."
            )
    queries: list[JudgedQuery] = []
    lines = (folder / JUDGMENTS).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{JUDGMENTS}:{number}: not JSON ({exc.msg}).") from None
        queries.append(_query(raw, f"{JUDGMENTS}:{number}"))
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        twice = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidInput(f"{JUDGMENTS}: query ids {twice} appear more than once.")
    memories_path = folder / MEMORIES
    memories = (
        [m.strip() for m in memories_path.read_text(encoding="utf-8").splitlines() if m.strip()]
        if memories_path.is_file()
        else []
    )
    return JudgedWorkspace(folder.name, folder / WORKSPACE, tuple(memories), tuple(queries))


def _query(raw: Any, where: str) -> JudgedQuery:
    if not isinstance(raw, dict) or not {"id", "style", "query", "relevant"} <= raw.keys():
        raise InvalidInput(f"{where}: expected an object with id, style, query and relevant.")
    style = raw["style"]
    if style not in STYLES:
        raise InvalidInput(f"{where}: style {style!r} is not one of {', '.join(STYLES)}.")
    relevant = tuple(_target(t, where) for t in raw["relevant"])
    if bool(relevant) == (style in UNANSWERABLE):
        raise InvalidInput(
            f"{where}: a {style} query "
            + ("must have an empty relevant list." if relevant else "needs a relevant item.")
        )
    fact = raw.get("fact", [])
    if not isinstance(fact, list) or not all(isinstance(f, str) and f.strip() for f in fact):
        raise InvalidInput(f"{where}: a fact is a list of phrasings; got {fact!r}.")
    if fact and not relevant:
        raise InvalidInput(f"{where}: a {style} query has no answer, so no fact.")
    return JudgedQuery(str(raw["id"]), style, str(raw["query"]), relevant, tuple(fact))


def _target(raw: Any, where: str) -> Target:
    named = [k for k in TARGET_KINDS if isinstance(raw, dict) and k in raw]
    grade = raw.get("grade", 1) if isinstance(raw, dict) else None
    if len(named) != 1 or not isinstance(raw[named[0]], str) or set(raw) - {*named, "grade"}:
        raise InvalidInput(
            f"{where}: a target is one of {', '.join(TARGET_KINDS)} with a name, and an optional "
            f"grade; got {raw!r}."
        )
    if not isinstance(grade, int) or grade < 1:
        raise InvalidInput(f"{where}: a grade is a whole number from 1; got {grade!r}.")
    return Target(named[0], raw[named[0]], grade)


@dataclass(frozen=True)
class Item:
    """One searchable item of the imported workspace, under the names a judgment can use."""

    kind: str  # page, bullet, memory, file or mail
    id: UUID
    name: str  # the title, the bullet's text, the file name or the subject
    text: str  # what a reference arm indexes for it


def import_judged_workspace(db: Database, cx: Context, judged: JudgedWorkspace) -> Loaded:
    """Import the workspace into a new knowledge base as `subspace import` does, extract the
    files' text, mark the memories, and resolve every judgment to an item id.

    InvalidInput lists every file that did not import and every name that does not resolve.
    """
    kb = commands.create_knowledge_base(cx, f"eval {judged.name}")
    report = import_path(cx, judged.workspace, kb_id=kb.id)
    finish_extraction(db, cx.settings, report)
    failed = [f"{r.source}: {r.outcome} {r.detail}".strip() for r in report.rows
              if r.outcome != "added"]  # fmt: skip
    if failed:
        raise InvalidInput(f"{judged.workspace} did not import cleanly: {'; '.join(failed)}.")
    bullets = [item for item in _items(cx, kb.id) if item.kind == "bullet"]
    problems: list[str] = []
    for fragment in judged.memories:
        found = _named(bullets, Target("bullet", fragment), MEMORIES, problems)
        if found is not None:
            commands.set_memory(cx, found.id, True)
    items = _items(cx, kb.id)
    qrels: dict[str, dict[str, int]] = {}
    for query in judged.queries:
        for target in query.relevant:
            item = _named(items, target, query.id, problems)
            if item is not None:
                qrels.setdefault(query.id, {})[str(item.id)] = target.grade
    if problems:
        raise InvalidInput(
            f"Some judgments of {judged.name} name nothing in its workspace: "
            + "; ".join(problems)
            + ". Fix the name in the judgment, or the item in the workspace."
        )
    return Loaded(
        name=judged.name,
        queries={q.id: q.text for q in judged.queries},
        qrels=qrels,
        expect_empty=frozenset(q.id for q in judged.queries if not q.relevant),
        target_of={item.id: str(item.id) for item in items},
        texts={str(item.id): item.text for item in items},
        kinds=None,
        depth=DEPTH,
        metrics=METRICS,
        facts={q.id: q.fact for q in judged.queries if q.fact},
    )


def _named(items: Iterable[Item], target: Target, where: str, problems: list[str]) -> Item | None:
    """The one item `target` names, or None with the reason added to `problems`."""
    if target.kind in ("bullet", "memory"):
        fragment = target.name.casefold()
        found = [
            i for i in items if i.kind in ("bullet", "memory") and fragment in i.name.casefold()
        ]
    else:
        found = [i for i in items if i.kind == target.kind and i.name == target.name]
    what = {"page": "page titled", "file": "file named", "mail": "mail with the subject"}.get(
        target.kind, "bullet containing"
    )
    if not found:
        problems.append(f"{where}: no {what} {target.name!r}")
        return None
    if len(found) > 1:
        problems.append(f"{where}: {len(found)} items match {target.name!r}; name one")
        return None
    if found[0].kind != target.kind:
        problems.append(f"{where}: {target.name!r} is a {found[0].kind}, judged as a {target.kind}")
        return None
    return found[0]


def _items(cx: Context, kb_id: UUID) -> list[Item]:
    """Every page, bullet, memory, file and mail of the knowledge base."""
    with cx.transaction() as conn:
        pages = conn.execute(
            "select id, title from kb.pages where workspace_id = %s and kb_id = %s",
            (cx.actor.workspace_id, kb_id),
        ).fetchall()
        nodes = conn.execute(
            "select n.id, n.text, coalesce(n.props->'memory' = 'true'::jsonb, false) as memory "
            "from kb.nodes n join kb.pages p on p.workspace_id = n.workspace_id "
            "and p.id = n.page_id where n.workspace_id = %s and p.kb_id = %s",
            (cx.actor.workspace_id, kb_id),
        ).fetchall()
        files = conn.execute(
            "select f.id, f.name, coalesce(t.text, '') as text from kb.files f "
            "left join search.file_text t on t.workspace_id = f.workspace_id and t.file_id = f.id "
            "where f.workspace_id = %s and f.kb_id = %s",
            (cx.actor.workspace_id, kb_id),
        ).fetchall()
        mail = conn.execute(
            "select id, subject, sender, body_text from kb.mail "
            "where workspace_id = %s and kb_id = %s",
            (cx.actor.workspace_id, kb_id),
        ).fetchall()
    return [
        *(Item("page", r["id"], r["title"], r["title"]) for r in pages),
        *(Item("memory" if r["memory"] else "bullet", r["id"], r["text"], r["text"])
          for r in nodes),
        *(Item("file", r["id"], r["name"], f"{r['name']}\n{r['text']}") for r in files),
        *(Item("mail", r["id"], r["subject"], f"{r['subject']}\n{r['sender']}\n{r['body_text']}")
          for r in mail),
    ]  # fmt: skip
