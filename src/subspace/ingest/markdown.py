"""Markdown into a page outline, through a CommonMark parser (markdown-it-py).

The outline follows the document's blocks: the first level-1 heading is the title, later
headings hold what follows them (nested by level), a paragraph is one bullet with its lines
joined, list items nest as written (an item's further paragraphs are its children), a code
block or a table is one bullet kept verbatim as Markdown, HTML comments, anchors and layout
tags vanish, and a thematic break is nothing. Inline formatting stays Markdown (`*em*`,
`` `code` ``, `[text](url)`), as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token

from subspace.ingest.front_matter import split_front_matter
from subspace.ingest.outline import Outline, OutlineItem, parse_plain_text

MAX_NESTING = 20  # CommonMark's preset: deeper blocks are read as text, never recursed into

# HTML elements whose tags carry no words of their own: dropped, their text kept. Anything
# else in angle brackets (`<implementations-keywords>`, `<email@host>`) is text.
_HTML_ELEMENTS = frozenset(
    "a abbr b big blockquote br center code dd del details div dl dt em font h1 h2 h3 h4 h5 h6 "
    "hr i img ins kbd li ol p picture pre s samp section small source span strike strong sub "
    "summary sup table tbody td th thead tr tt u ul var video wbr".split()
)
_TAG = re.compile(r"^</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^>]*)?/?>$", re.S)
_IMAGE_ALT = re.compile(r"""<img\b[^>]*?\balt\s*=\s*(?:"([^"]*)"|'([^']*)')[^>]*>""", re.I)
_ANY_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9-]*(?:\s[^>]*)?/?>", re.S)


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True, "maxNesting": MAX_NESTING}).enable("table")


def parse_markdown(text: str, *, fallback_title: str = "") -> Outline:
    """Turn Markdown into an outline.

    >>> outline = parse_markdown("# Trip\\n## Packing\\nWarm\\nsocks.\\n- wool\\n  - two")
    >>> outline.title, [i.text for i in outline.items[0].children]
    ('Trip', ['Warm socks.', 'wool'])
    """
    front, text = split_front_matter(text)
    front_title, front_rest = front.title, front.raw
    tokens = _parser().parse(text)
    if _lost_lines(tokens, text.splitlines()):
        # Blocks nested deeper than MAX_NESTING are skipped by the parser; rather than lose
        # their words, read the document as plain text.
        outline = parse_plain_text(text, fallback_title=front_title or fallback_title)
        if front_rest.strip():
            outline.items.insert(0, OutlineItem(f"```yaml\n{front_rest}\n```"))
        outline.properties = front.properties
        return outline
    # A document of several level-1 headings (a changelog's versions) is titled by its name,
    # each heading a section; one with a single level-1 heading is titled by it.
    titled = sum(t.type == "heading_open" and t.tag == "h1" for t in tokens) == 1
    reader = _Reader(text.splitlines(), titled=titled)
    reader.read(tokens)
    if front_rest.strip():  # front matter that is not YAML stays with the page, as written
        reader.root.insert(0, OutlineItem(f"```yaml\n{front_rest}\n```"))
    title = front_title or reader.title or fallback_title
    return Outline(title=title, items=reader.root, properties=front.properties)


class _Reader:
    """Walks markdown-it's block tokens, keeping where the next bullet goes."""

    def __init__(self, lines: list[str], *, titled: bool) -> None:
        self.lines = lines
        self.titled = titled
        self.title = ""
        self.root: list[OutlineItem] = []
        # (heading level, where its content goes); level 0 is the page itself.
        self.sections: list[tuple[int, list[OutlineItem]]] = [(0, self.root)]
        self.items: list[OutlineItem] = []  # the list items open, innermost last
        self.skip_until = -1  # tokens inside a table, already taken whole

    def read(self, tokens: Sequence[Token]) -> None:
        for index, token in enumerate(tokens):
            if index <= self.skip_until:
                continue
            kind = token.type
            if kind == "heading_open":
                self._heading(int(token.tag[1]), tokens[index + 1])
                self.skip_until = index + 2
            elif kind == "paragraph_open":
                self._paragraph(inline_markdown(tokens[index + 1].children or []))
                self.skip_until = index + 2
            elif kind == "list_item_open":
                item = OutlineItem("")
                self._container().append(item)
                self.items.append(item)
            elif kind == "list_item_close":
                self._close_item(self.items.pop())
            elif kind in ("fence", "code_block"):
                self._add(_code(token))
            elif kind == "table_open":
                self._add(self._source(token))
                self.skip_until = _closing(tokens, index, "table_close")
            elif kind == "html_block":
                # An image says its alt text (a README's banner: "The Rust Programming
                # Language: A language empowering everyone…"); other tags say nothing.
                text = _IMAGE_ALT.sub(lambda m: f" {m[1] or m[2] or ''} ", token.content)
                self._add(" ".join(_ANY_TAG.sub(" ", text).split()))

    def _container(self) -> list[OutlineItem]:
        return self.items[-1].children if self.items else self.sections[-1][1]

    def _heading(self, level: int, inline: Token) -> None:
        text = inline_markdown(inline.children or [])
        if self.items:  # a heading inside a list item is a line of that item
            self._paragraph(text)
            return
        if level == 1 and self.titled and not self.title and not self.root:
            self.title = text
            return
        while self.sections[-1][0] >= level:
            self.sections.pop()
        item = OutlineItem(text)
        self.sections[-1][1].append(item)
        self.sections.append((level, item.children))

    def _paragraph(self, text: str) -> None:
        if self.items and not self.items[-1].text and not self.items[-1].children:
            self.items[-1].text = text  # an item's first paragraph is the item
        else:
            self._add(text)

    def _add(self, text: str) -> None:
        if text.strip():
            self._container().append(OutlineItem(text))

    def _close_item(self, item: OutlineItem) -> None:
        """An item that began with a code block or a nested list takes its first child's
        text; an empty one leaves nothing behind."""
        if item.text:
            return
        parent = self._container()
        if item.children:
            first = item.children.pop(0)
            item.text, item.children = first.text, first.children + item.children
        elif parent and parent[-1] is item:
            parent.pop()

    def _source(self, token: Token) -> str:
        start, end = token.map or (0, 0)
        return "\n".join(line.rstrip() for line in self.lines[start:end])


_LEAVES = (
    "paragraph_open",
    "heading_open",
    "fence",
    "code_block",
    "html_block",
    "table_open",
    "hr",
)
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S")  # `[id]: url`, which makes no block
_WORDS = re.compile(r"\w")


def _lost_lines(tokens: Sequence[Token], lines: list[str]) -> bool:
    """Whether a line with words is in no block the parser made."""
    covered = [False] * len(lines)
    for token in tokens:
        if token.type in _LEAVES and token.map:
            start, end = token.map
            covered[start:end] = [True] * (end - start)
    return any(
        not seen and _WORDS.search(line) and not _REFERENCE.match(line)
        for seen, line in zip(covered, lines, strict=True)
    )


def _closing(tokens: Sequence[Token], start: int, kind: str) -> int:
    for index in range(start, len(tokens)):
        if tokens[index].type == kind:
            return index
    return len(tokens)


def _code(token: Token) -> str:
    """A code block as a fenced block, whatever it was written as."""
    body = token.content.rstrip("\n")
    fence = "````" if "```" in body else "```"
    return f"{fence}{token.info.strip()}\n{body}\n{fence}"


def inline_markdown(children: Sequence[Token]) -> str:
    """An inline run as one line of Markdown: line breaks joined, tags of HTML elements
    dropped (their text kept), links and emphasis as written.

    >>> from markdown_it import MarkdownIt
    >>> tokens = MarkdownIt("commonmark", {"html": True}).parseInline(
    ...     'A <a id="x"></a>*b* [c](http://d)\\nset to <not-a-tag>.')
    >>> inline_markdown(tokens[0].children)
    'A *b* [c](http://d) set to <not-a-tag>.'
    """
    out: list[str] = []
    links: list[str] = []
    for token in children:
        kind = token.type
        if kind == "text":
            out.append(token.content)
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind == "code_inline":
            tick = "``" if "`" in token.content else "`"
            out.append(f"{tick}{token.content}{tick}")
        elif kind in ("em_open", "em_close", "strong_open", "strong_close"):
            out.append(token.markup)
        elif kind == "link_open":
            href = str(token.attrGet("href") or "")
            autolink = token.markup == "autolink"
            links.append("" if autolink else href)
            out.append("" if autolink else "[")
        elif kind == "link_close":
            href = links.pop() if links else ""
            out.append(f"]({href})" if href else "")
        elif kind == "image":
            alt = "".join(child.content for child in token.children or [])
            out.append(alt)
        elif kind == "html_inline":
            tag = _TAG.match(token.content)
            if token.content.startswith("<!--") or (tag and tag[1].lower() in _HTML_ELEMENTS):
                continue
            out.append(token.content)
    return " ".join("".join(out).split())


_FENCED = re.compile(r"\A(`{3,}|~{3,})[^\n]*\n(.*)\n\1\Z", re.S)


def markdown_plain(text: str) -> str:
    """The words of a bullet held as Markdown, as a reader sees them: a link is its text (its
    URL only when it has no text), emphasis and code marks go, an image is its alt text, and a
    fenced code block is its code.

    >>> markdown_plain("See *the* [guide](https://x.org/g) or <https://y.org>, `make`.")
    'See the guide or https://y.org, make.'
    >>> markdown_plain("[](https://x.org/only)")
    'https://x.org/only'
    >>> markdown_plain("```sh\\nmake install\\n```")
    'make install'
    """
    fenced = _FENCED.match(text)
    if fenced is not None:
        return fenced[2]
    if "\n" in text:  # a table or other block kept as written
        return text
    out: list[str] = []
    links: list[tuple[int, str]] = []  # the open links: where their text starts, their URL
    for token in _inline_parser().parseInline(text)[0].children or []:
        kind = token.type
        if kind in ("text", "code_inline"):
            out.append(token.content)
        elif kind == "link_open":
            links.append((len(out), str(token.attrGet("href") or "")))
        elif kind == "link_close" and links:
            start, href = links.pop()
            if not "".join(out[start:]).strip():
                out.append(href)
        elif kind in ("softbreak", "hardbreak"):
            out.append(" ")
        elif kind == "image":
            out.append("".join(child.content for child in token.children or []))
        elif kind == "html_inline":
            tag = _TAG.match(token.content)
            if not (token.content.startswith("<!--") or (tag and tag[1].lower() in _HTML_ELEMENTS)):
                out.append(token.content)
    return " ".join("".join(out).split())


def _inline_parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True})
