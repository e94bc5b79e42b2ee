"""`[[wikilinks]]` between imported pages, as Obsidian and other note apps write them, turned
into links to the pages they name. Pure: no I/O (the importer says which pages there are)."""

from __future__ import annotations

import re
from collections.abc import Callable
from uuid import UUID

from subspace.ingest.outline import OutlineItem

# [[Target]], [[Target|shown text]], [[Target#Heading]]; the target never spans lines.
WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+)(?:#[^\[\]|\n]*)?(?:\|([^\[\]\n]+))?\]\]")


def page_key(name: str) -> str:
    """How a link names a page: its title or file name, case and spacing aside.

    >>> page_key("  Lisbon   Trip.md")
    'lisbon trip'
    """
    name = re.sub(r"\.(?:md|markdown|mdown|txt|text)$", "", name.strip(), flags=re.I)
    return " ".join(name.split()).lower()


def link_outline(items: list[OutlineItem], find: Callable[[str], UUID | None]) -> int:
    """Rewrite the wikilinks of `items` whose page `find` knows (by `page_key`) as Markdown
    links to the page, in place; return how many are left unresolved.

    >>> items = [OutlineItem("See [[Trip|the trip]] and [[Nowhere]].")]
    >>> link_outline(items, lambda key: UUID(int=1) if key == "trip" else None)
    1
    >>> items[0].text
    'See [the trip](/p/00000000-0000-0000-0000-000000000001) and [[Nowhere]].'
    """
    left = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal left
        target, shown = match[1], match[2]
        page_id = find(page_key(target.split("/")[-1]))
        if page_id is None:
            left += 1
            return match[0]
        text = (shown or target).strip().replace("[", "(").replace("]", ")")
        return f"[{text}](/p/{page_id})"

    for item in items:
        if "[[" in item.text:
            item.text = WIKILINK.sub(replace, item.text)
        left += link_outline(item.children, find)
    return left
