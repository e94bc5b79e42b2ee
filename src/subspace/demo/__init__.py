"""The demo workspace that `subspace serve` seeds on first start."""

from __future__ import annotations

from importlib import resources

from subspace import commands
from subspace.context import Context
from subspace.db import queries
from subspace.ingest.importer import CONTENT_TYPES, Importer
from subspace.ingest.markdown import parse_markdown
from subspace.models import PageSummary

# Memory items of the demo: bullets marked to be remembered, under the welcome page's "Memory".
MEMORIES = (
    "Prefers the window seat on long train rides",
    "On-call handover is on Mondays at 10:00; the runbook is the incident review page",
    "Recipes on this workspace use grams and degrees Celsius",
)


def seed_demo(cx: Context) -> list[PageSummary]:
    """Create the demo pages, files and mail in the default knowledge base, in one transaction.

    The files' text is extracted afterwards by the extraction worker, like any upload.
    """
    pages = []
    demo = resources.files("subspace.demo")
    with cx.transaction() as conn:
        bound = cx.on(conn)
        for entry in sorted((demo / "pages").iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".md"):
                continue
            outline = parse_markdown(entry.read_text(encoding="utf-8"), fallback_title=entry.name)
            pages.append(commands.create_page_from_outline(bound, outline.title, outline.items))
        _add_memories(bound, pages[0])
        kb = queries.default_knowledge_base(conn, cx.actor.workspace_id)
        importer = Importer(bound, kb.id)
        for entry in sorted((demo / "files").iterdir(), key=lambda e: e.name):
            suffix = "." + entry.name.rsplit(".", 1)[-1]
            if suffix == ".mbox":
                importer.add_mailbox(entry.read_bytes(), entry.name)
            elif suffix in CONTENT_TYPES:
                commands.upload_file(
                    bound, entry.name, entry.read_bytes(), content_type=CONTENT_TYPES[suffix]
                )
    return pages


def _add_memories(cx: Context, welcome: PageSummary) -> None:
    with cx.transaction() as conn:
        tree = queries.get_page_tree(conn, cx.actor.workspace_id, welcome.id)
    heading = next(node for node in tree.nodes if node.text == "Memory")
    for text in MEMORIES:
        commands.add_node(cx, welcome.id, text, parent_id=heading.id, props={"memory": True})
