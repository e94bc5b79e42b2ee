"""Parse Markdown or plain text into a page outline: a title and nested bullets."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_TAB_WIDTH = 4


@dataclass
class OutlineItem:
    text: str
    children: list[OutlineItem] = field(default_factory=list)


@dataclass
class Outline:
    title: str
    items: list[OutlineItem]


def parse_outline(text: str, *, fallback_title: str = "") -> Outline:
    """Turn Markdown into an outline.

    The first level-1 heading (or `fallback_title`) becomes the title. Later headings become
    bullets that hold what follows them, nested by heading level; list items nest by their
    indentation under the nearest heading; other paragraphs become bullets of their own.

    >>> outline = parse_outline("# Trip\\n## Packing\\n- socks\\n  - wool")
    >>> outline.title, outline.items[0].children[0].children[0].text
    ('Trip', 'wool')
    """
    title = ""
    root: list[OutlineItem] = []
    # Stack of (heading level, bullets of that section). Level 0 is the page itself.
    sections: list[tuple[int, list[OutlineItem]]] = [(0, root)]
    # Stack of (indent, item) for the list being read in the current section.
    list_stack: list[tuple[int, OutlineItem]] = []
    paragraph: list[str] = []

    def flush_paragraph() -> None:
        if paragraph:
            sections[-1][1].append(OutlineItem(" ".join(paragraph)))
            paragraph.clear()

    for raw in text.expandtabs(_TAB_WIDTH).splitlines():
        line = raw.rstrip()
        if not line.strip():
            flush_paragraph()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_paragraph()
            list_stack.clear()
            level, heading_text = len(heading[1]), heading[2].strip()
            if level == 1 and not title and not root:
                title = heading_text
                continue
            while sections[-1][0] >= level:
                sections.pop()
            item = OutlineItem(heading_text)
            sections[-1][1].append(item)
            sections.append((level, item.children))
            continue
        bullet = _LIST_ITEM.match(line)
        if bullet:
            flush_paragraph()
            indent, item_text = len(bullet[1]), bullet[2].strip()
            while list_stack and list_stack[-1][0] >= indent:
                list_stack.pop()
            item = OutlineItem(item_text)
            parent = list_stack[-1][1].children if list_stack else sections[-1][1]
            parent.append(item)
            list_stack.append((indent, item))
            continue
        if list_stack and line.startswith(" "):
            # A continuation line of the current list item.
            list_stack[-1][1].text += " " + line.strip()
            continue
        list_stack.clear()
        paragraph.append(line.strip())
    flush_paragraph()
    return Outline(title=title or fallback_title, items=root)


def parse_plain_text(text: str, *, fallback_title: str = "") -> Outline:
    """Turn plain text into an outline: each non-empty line is a bullet of its own, in order,
    under `fallback_title` (plain text has no markup to take a title or nesting from).

    >>> [item.text for item in parse_plain_text("milk\n\n  eggs \n").items]
    ['milk', 'eggs']
    """
    items = [OutlineItem(line.strip()) for line in text.splitlines() if line.strip()]
    return Outline(title=fallback_title, items=items)
