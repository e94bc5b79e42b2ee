"""A page outline (a title and nested bullets), and plain text read into one (Markdown is
read by ingest/markdown.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_TAB_WIDTH = 4


@dataclass
class OutlineItem:
    text: str
    children: list[OutlineItem] = field(default_factory=list)


@dataclass
class Outline:
    title: str
    items: list[OutlineItem]
    # Front matter's keys other than its title, as parsed (ingest/front_matter.py).
    properties: dict[str, Any] = field(default_factory=dict)


# Lines this long or longer are taken as prose wrapped by hand (text is wrapped at 70-80
# characters) and joined into their paragraph; a block of shorter lines (a shopping list,
# an address) keeps a bullet a line.
WRAPPED_WIDTH = 40
_UNDERLINE = re.compile(r"^\s*([=\-~^*#])\1{2,}\s*$")  # a setext underline, or a rule
_UNDERLINE_LEVELS = {"=": 1, "-": 2}  # any other character underlines a third level
_INDENTED = re.compile(r"^(?: {4}|\t)")
_LIST_MARK = re.compile(r"^\s*(?:[*+\-o]|\d{1,3}[.)])\s+(?=\S)")


def parse_plain_text(text: str, *, fallback_title: str = "") -> Outline:
    r"""Turn plain text into an outline: a paragraph (lines between blank lines) is one bullet
    with its hard-wrapped lines joined (a block of short lines keeps a bullet a line); a line
    underlined with `===`, `---` or the like is a heading holding what follows (the only `===`
    heading, first, is the title); a block of `*`, `-` or numbered items is a bullet each; a
    block of lines indented four spaces is one bullet kept verbatim as code; a line of `----`
    alone is a rule and says nothing.

    >>> outline = parse_plain_text("Guide\n=====\n\nSet up\n------\nRun the tool with the "
    ...     "defaults that it reads\nfrom its file.\n\n    make\n    make install\n")
    >>> outline.title, outline.items[0].text
    ('Guide', 'Set up')
    >>> [c.text for c in outline.items[0].children]  # doctest: +NORMALIZE_WHITESPACE
    ['Run the tool with the defaults that it reads from its file.',
     '```\nmake\nmake install\n```']
    """
    pieces = [piece for block in _blocks(text.expandtabs(_TAB_WIDTH)) for piece in _split(block)]
    titles = sum(1 for level, _ in pieces if level == 1)
    title = ""
    root: list[OutlineItem] = []
    sections: list[tuple[int, list[OutlineItem]]] = [(0, root)]
    for level, lines in pieces:
        if level:
            heading = " ".join(lines[0].split())
            if level == 1 and titles == 1 and not title and not root:
                title = heading
                continue
            while sections[-1][0] >= level:
                sections.pop()
            item = OutlineItem(heading)
            sections[-1][1].append(item)
            sections.append((level, item.children))
        elif _LIST_MARK.match(lines[0]):
            sections[-1][1].extend(OutlineItem(text) for text in _list_items(lines))
        elif len(lines) > 1 and all(_INDENTED.match(line) for line in lines):
            code = "\n".join(line[_TAB_WIDTH:] for line in lines)
            sections[-1][1].append(OutlineItem(f"```\n{code}\n```"))
        elif max(len(line.strip()) for line in lines) < WRAPPED_WIDTH:
            sections[-1][1].extend(OutlineItem(line.strip()) for line in lines)  # a list
        else:
            sections[-1][1].append(OutlineItem(" ".join(" ".join(lines).split())))
    return Outline(title=title or fallback_title, items=root)


def _list_items(lines: list[str]) -> list[str]:
    """A block of list items (`* a`, `- b`, `1. c`), each with its wrapped lines joined."""
    items: list[list[str]] = []
    for line in lines:
        marked = _LIST_MARK.match(line)
        if marked or not items:
            items.append([line[marked.end() :] if marked else line])
        else:
            items[-1].append(line)
    return [" ".join(" ".join(item).split()) for item in items]


def _split(block: list[str]) -> list[tuple[int, list[str]]]:
    """A block's headings (a line of text underlined: level 1 for `=`, 2 for `-`, else 3) and
    the runs of lines between them (level 0); rules on their own are dropped."""
    pieces: list[tuple[int, list[str]]] = []
    run: list[str] = []
    for line in block:
        underline = _UNDERLINE.match(line)
        if underline is None:
            run.append(line)
            continue
        if run and not _INDENTED.match(run[-1]):
            heading = run.pop()
            if run:
                pieces.append((0, run))
            pieces.append((_UNDERLINE_LEVELS.get(underline[1], 3), [heading]))
        elif run:
            pieces.append((0, run))
        run = []
    if run:
        pieces.append((0, run))
    return pieces


def _blocks(text: str) -> list[list[str]]:
    """The runs of non-blank lines, right-stripped."""
    blocks: list[list[str]] = [[]]
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [block for block in blocks if block]
