"""HTML read for its words: the main content's blocks, under the headings that hold them,
without a page's furniture (menus, banners, sidebars, documentation generators' navigation),
and the document's own title. Pure: no I/O."""

from __future__ import annotations

import re
from typing import Any

from subspace.ingest.failures import ExtractionFailed
from subspace.splitting import Block

# Elements whose text is never content (the head: its <title> is the file's title), and elements
# that end a line.
_SKIPPED_TAGS = {
    "head", "script", "style", "noscript", "template", "svg", "iframe", "object",
    # The page's furniture, not its words: menus, sidebars, controls.
    "nav", "aside", "form", "button", "select", "menu", "dialog",
}  # fmt: skip
# Roles that mark furniture too, whatever the element; and a page's own header and footer
# (outside its main content: an article's header holds its heading and stays).
_SKIPPED_ROLES = {"navigation", "banner", "contentinfo", "search", "menu", "menubar", "toolbar",
                  "dialog", "complementary"}  # fmt: skip
_PAGE_FURNITURE = {"header", "footer"}
# Class names that documentation generators give their navigation blocks: Texinfo's
# div.header and div.nav-panel, DocBook's div.navheader, div.navfooter and div.toc, LaTeX2HTML's
# div.navigation, Texinfo's table.menu and div.contents. Read on container elements only (an
# mdBook heading's link is a.header). Measured by bench/html_extraction.py.
_FURNITURE_CLASSES = {
    "nav", "navbar", "navigation", "navheader", "navfooter", "nav-panel", "breadcrumb",
    "breadcrumbs", "sidebar", "toc", "menu", "contents", "shortcontents", "header", "footer",
}  # fmt: skip
_FURNITURE_IDS = {"banner", "toc", "table_of_contents", "sidebar", "nav", "navbar", "navigation",
                  "menu", "breadcrumbs"}  # fmt: skip
_CONTAINERS = {"div", "table", "section", "ul", "ol"}
_SPACES = re.compile(r"\s+")
_BLOCK_TAGS = {
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
    "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
    "main", "nav", "ol", "p", "pre", "section", "table", "tr", "ul", "title",
}  # fmt: skip


# Tags that never need a closing tag (void) or may omit it; the nesting pre-scan skips them.
_UNCLOSED_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot",
    "option", "optgroup", "colgroup", "caption", "rb", "rt", "rp", "html", "head", "body",
}  # fmt: skip
# The start of a tag; its end is the next ">" (found with str.find, see _nesting_exceeds).
_TAG_START = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)")


def html_text(markup: str, max_depth: int) -> str:
    """The visible text of an HTML document, one line per block, list items as "- " lines
    (a mail's HTML body; a document's is read by `html_document`)."""
    return "\n".join(block.text for block in html_document(markup, max_depth)[1])


_HEADING_TAGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}


def html_document(
    markup: str, max_depth: int, max_chars: int | None = None
) -> tuple[str | None, list[Block]]:
    """An HTML document's title and the blocks of its main content: a block per paragraph,
    item (as "- " text), table row or `<pre>` (its lines kept), and headings that hold what
    follows them.

    The title is the main content's first heading (or an `<h1>`) that its `<title>` holds too
    (a site appends its own name to the title: "Publishing a Crate - The Rust Programming
    Language"), else the `<title>`, else the first `<h1>`. Walks the tree without recursion; a
    document nested deeper than `max_depth` fails. The walk stops once its blocks hold more than
    `max_chars` (what extraction keeps), so a huge page costs its parse, not a walk of all of it.
    """
    from selectolax.lexbor import LexborHTMLParser

    # The parser's time grows with the square of the nesting depth (8 s for 100,000 nested
    # divs), so an over-deep document is refused by a linear scan before it is parsed.
    if _nesting_exceeds(markup, max_depth):
        raise _too_deep(max_depth)
    tree = LexborHTMLParser(markup)
    root = _main_content(tree)
    title = _html_title(tree, root)
    if root is None:
        return title, []
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []  # the open headings: (level, text)
    line: list[str] = []
    kept = 0  # characters in `blocks`

    def add(text: str, is_heading: bool = False) -> None:
        nonlocal kept
        blocks.append(Block(text, tuple(h for _, h in headings), is_heading=is_heading))
        kept += len(text)

    def flush() -> None:
        text = _tidy_lines("".join(line))
        line.clear()
        if text:
            add(text)

    # (node, depth); a None node marks the end of a block element.
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack and (max_chars is None or kept <= max_chars):
        node, depth = stack.pop()
        if node is None:
            flush()
            continue
        if depth > max_depth:
            raise _too_deep(max_depth)
        tag = node.tag
        if tag == "-text":
            # In HTML a line break in text is a space; only <pre> keeps its lines.
            line.append(_SPACES.sub(" ", node.text_content or ""))
            continue
        if tag in _SKIPPED_TAGS or tag == "-comment" or _is_furniture(node, tag, root):
            continue
        if tag == "pre":
            flush()
            # Code keeps its lines and their indentation; only blank edges and line ends go.
            code = "\n".join(row.rstrip() for row in _visible_text(node, root).splitlines())
            if code.strip("\n"):
                add(code.strip("\n"))
            continue
        if tag in _HEADING_TAGS:
            flush()
            text = _heading_text(node, root)
            if text:
                level = _HEADING_TAGS[tag]
                while headings and headings[-1][0] >= level:
                    headings.pop()
                headings.append((level, text))
                add(text, is_heading=True)
            continue
        if tag in _BLOCK_TAGS:
            flush()
            if tag == "li":
                line.append("- ")
            stack.append((None, depth))
        if tag in ("td", "th"):
            line.append(" | ")
        stack.extend((c, depth + 1) for c in reversed(_children(node)))
    flush()
    return title, blocks


# A permalink beside a heading or a definition is a link whose whole text is a mark ("#" in
# Node's docs, "¶" in Sphinx's and Texinfo's): furniture.
_PERMALINK_MARKS = {"#", "¶", "§", "🔗"}
_SECTION_NUMBER = re.compile(r"^(?:\d+\.)*\d+\.?\s+")


def _heading_text(node: Any, root: Any) -> str:
    return " ".join(_visible_text(node, root).split())


def _html_title(tree: Any, main: Any) -> str | None:
    found = tree.css_first("title")
    titled = " ".join((found.text(deep=True) or "").split()) if found is not None else ""
    # The main content's headings: a site's menu may have an <h1> of the site's own name.
    scope = main if main is not None else tree
    root = scope if main is not None else tree.root
    first = scope.css_first("h1, h2, h3, h4, h5, h6")
    h1s = [_heading_text(h, root) for h in scope.css("h1")]
    leading = _heading_text(first, root) if first is not None else ""
    for heading in (leading, *h1s):
        if heading and _SECTION_NUMBER.sub("", heading).lower() in titled.lower():
            return heading
    return titled or next((h for h in h1s if h), None)


def _main_content(tree: Any) -> Any:
    """Where a page keeps its words: its `<main>` (or `role=main`, or its only `<article>`),
    else the whole document."""
    for selector in ("main", "[role=main]"):
        found = tree.css_first(selector)
        if found is not None:
            return found
    articles = tree.css("article")
    return articles[0] if len(articles) == 1 else tree.root


def _is_furniture(node: Any, tag: str, root: Any) -> bool:
    """A menu, a banner, a hidden element, a block a generator marks as navigation, or the
    page's own header or footer (a header holding the page's first heading stays)."""
    attributes = node.attributes
    if "hidden" in attributes or attributes.get("aria-hidden") == "true":
        return True
    if (attributes.get("role") or "").lower() in _SKIPPED_ROLES:
        return True
    if tag == "a" and (node.text(deep=True) or "").strip() in _PERMALINK_MARKS:
        return True
    if tag in _CONTAINERS and node is not root:
        classes = set((attributes.get("class") or "").lower().split())
        if classes & _FURNITURE_CLASSES or (attributes.get("id") or "").lower() in _FURNITURE_IDS:
            return True
    if tag not in _PAGE_FURNITURE or root.tag not in ("html", "body", "-document"):
        return False
    return tag == "footer" or node.css_first("h1") is None


def _visible_text(node: Any, root: Any) -> str:
    """The text of `node` without what the walk skips inside it (a heading's "copy link"
    button, a code block's "copy" button, hidden parts)."""
    parts: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        tag = current.tag
        if tag == "-text":
            parts.append(current.text_content or "")
            continue
        if current is not node and (
            tag in _SKIPPED_TAGS or tag == "-comment" or _is_furniture(current, tag, root)
        ):
            continue
        stack.extend(reversed(_children(current)))
    return "".join(parts)


def _children(node: Any) -> list[Any]:
    """A node's children in document order (lexbor links them as a list, not an array)."""
    children = []
    child = node.child
    while child is not None:
        children.append(child)
        child = child.next
    return children


def _nesting_exceeds(markup: str, max_depth: int) -> bool:
    # One pass: a tag runs from "<name" to the next ">". A pattern that looked for that ">"
    # itself rescanned the rest of the document from every "<" when there was none ("<a"
    # repeated 40,000 times took 49 s); once no ">" is left, no later tag can end either.
    depth = 0
    position = 0
    while True:
        start = _TAG_START.search(markup, position)
        if start is None:
            return False
        end = markup.find(">", start.end())
        if end == -1:
            return False
        position = end + 1
        closing, name = start.group(1), start.group(2)
        if markup[end - 1] == "/" or name.lower() in _UNCLOSED_TAGS:
            continue
        if closing:
            depth = max(0, depth - 1)
        else:
            depth += 1
            if depth > max_depth:
                return True


def _too_deep(max_depth: int) -> ExtractionFailed:
    return ExtractionFailed(
        f"the HTML is nested more than {max_depth} levels deep (SUBSPACE_MAX_HTML_DEPTH)"
    )


def _tidy_lines(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line and line != "-")
