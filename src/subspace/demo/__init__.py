"""The demo workspace that `subspace serve` seeds on first start."""

from __future__ import annotations

from importlib import resources

from subspace import commands
from subspace.context import Context
from subspace.ingest.outline import OutlineItem, parse_outline
from subspace.models import Page


def write_outline(cx: Context, page: Page, items: list[OutlineItem]) -> int:
    """Append `items` (and their children) to `page`; return the number of bullets written."""
    written = 0

    def add(parent_id: object, item: OutlineItem) -> None:
        nonlocal written
        node = commands.add_node(cx, page.id, item.text, parent_id=parent_id)  # type: ignore[arg-type]
        written += 1
        for child in item.children:
            add(node.id, child)

    for item in items:
        add(None, item)
    return written


def seed_demo(cx: Context) -> list[Page]:
    """Create the demo pages in the default knowledge base, in one transaction."""
    pages = []
    with cx.transaction() as conn:
        bound = cx.on(conn)
        folder = resources.files("subspace.demo") / "pages"
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".md"):
                continue
            outline = parse_outline(entry.read_text(encoding="utf-8"), fallback_title=entry.name)
            page = commands.create_page(bound, outline.title)
            write_outline(bound, page, outline.items)
            pages.append(page)
    return pages
