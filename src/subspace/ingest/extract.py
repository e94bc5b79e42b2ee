"""Text out of uploaded documents: plain text, Markdown, HTML, PDF and DOCX.

Pure functions of the bytes and the limits; `ingest.isolation` runs them in a child process
so a hostile document cannot take the server's memory or time.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from charset_normalizer import from_bytes

from subspace.text import clean_text

SNIFF_BYTES = 1024  # PDF allows a little junk before its header
ENCODING_SAMPLE_BYTES = 256 * 1024  # enough for charset detection, bounded in time

TEXT_SUFFIXES = {".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".org"}
MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

# Elements whose text is never content, and elements that end a line.
_SKIPPED_TAGS = {
    "script", "style", "noscript", "template", "svg", "iframe", "object",
    # The page's furniture, not its words: menus, sidebars, controls.
    "nav", "aside", "form", "button", "select", "menu", "dialog",
}  # fmt: skip
# Roles that mark furniture too, whatever the element; and a page's own header and footer
# (outside its main content: an article's header holds its heading and stays).
_SKIPPED_ROLES = {"navigation", "banner", "contentinfo", "search", "menu", "menubar", "toolbar",
                  "dialog", "complementary"}  # fmt: skip
_PAGE_FURNITURE = {"header", "footer"}
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
_LATIN_CODE_PAGES = {
    "cp1250", "cp1252", "cp1254", "cp1257", "latin_1", "iso8859_2", "iso8859_3", "iso8859_4",
    "iso8859_9", "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16",
    "mac_latin2", "mac_roman", "mac_iceland", "mac_turkish", "cp437", "cp850",
}  # fmt: skip
# The start of a tag; its end is the next ">" (found with str.find, see _nesting_exceeds).
_TAG_START = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)")


class ExtractionFailed(Exception):
    """The document's text cannot be extracted; `reason` is shown on the file."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ExtractLimits:
    """The limits one extraction runs under (picklable, so it crosses to the child)."""

    max_chars: int
    max_pdf_pages: int
    max_archive_inflated_bytes: int
    max_archive_entries: int
    max_html_depth: int


@dataclass(frozen=True)
class Extracted:
    text: str
    truncated: bool
    kind: str


def detect_kind(data: bytes, name: str, content_type: str) -> str | None:
    """The extractor for a document, from its magic bytes, name and type; None if unsupported.

    Unknown types are never guessed at: they fail as unsupported.
    """
    suffix = PurePath(name).suffix.lower()
    ctype = content_type.split(";")[0].strip().lower()
    if b"%PDF-" in data[:SNIFF_BYTES] or suffix == ".pdf" or ctype == "application/pdf":
        return "pdf"
    if suffix == ".docx" or ctype == DOCX_TYPE:
        return "docx"
    if suffix in HTML_SUFFIXES or ctype in ("text/html", "application/xhtml+xml"):
        return "html"
    if suffix in MARKDOWN_SUFFIXES or ctype in ("text/markdown", "text/x-markdown"):
        return "markdown"
    if suffix in TEXT_SUFFIXES or ctype.startswith("text/"):
        return "text"
    return None


def extract(data: bytes, name: str, content_type: str, limits: ExtractLimits) -> Extracted:
    """Extract the text of one document, cleaned and cut to `limits.max_chars`."""
    kind = detect_kind(data, name, content_type)
    if kind is None:
        raise ExtractionFailed(
            f"unsupported type {content_type or 'unknown'}: Subspace reads PDF, Word (.docx), "
            "HTML, Markdown and text"
        )
    if kind == "pdf":
        text, truncated = _pdf_text(data, limits)
    elif kind == "docx":
        text, truncated = _docx_text(data, limits), False
    elif kind == "html":
        text, truncated = html_text(decode_text(data), limits.max_html_depth), False
    else:
        text, truncated = decode_text(data), False
    text = clean_text(text)
    if len(text) > limits.max_chars:
        text, truncated = text[: limits.max_chars], True
    return Extracted(text=text, truncated=truncated, kind=kind)


def decode_text(data: bytes) -> str:
    """Decode text of unknown encoding: BOMs, then UTF-8, then a detected encoding."""
    for bom, encoding in (
        (b"\xef\xbb\xbf", "utf-8-sig"),
        (b"\xff\xfe", "utf-16"),
        (b"\xfe\xff", "utf-16"),
    ):
        if data.startswith(bom):
            return data.decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    matches = from_bytes(data[:ENCODING_SAMPLE_BYTES])
    best = matches.best()
    encoding = best.encoding if best is not None else "cp1252"
    # The detector cannot tell the Latin code pages apart on short text (it reads French
    # Latin-1 as Baltic cp1257); Windows-1252 is by far the most common of them.
    if encoding in _LATIN_CODE_PAGES and any(m.encoding == "cp1252" for m in matches):
        encoding = "cp1252"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("cp1252", errors="replace")


def html_text(markup: str, max_depth: int) -> str:
    """The visible text of an HTML document, one line per block, list items as "- " lines.

    Walks the tree without recursion; a document nested deeper than `max_depth` fails.
    """
    from selectolax.lexbor import LexborHTMLParser

    # The parser's time grows with the square of the nesting depth (8 s for 100,000 nested
    # divs), so an over-deep document is refused by a linear scan before it is parsed.
    if _nesting_exceeds(markup, max_depth):
        raise _too_deep(max_depth)
    tree = LexborHTMLParser(markup)
    root = _main_content(tree)
    if root is None:
        return ""
    parts: list[str] = []
    # (node, depth); a None node marks the end of a block element.
    stack: list[tuple[object, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if node is None:
            parts.append("\n")
            continue
        if depth > max_depth:
            raise _too_deep(max_depth)
        tag = node.tag  # type: ignore[attr-defined]
        if tag == "-text":
            # In HTML a line break in text is a space; only <pre> keeps its lines.
            parts.append(_SPACES.sub(" ", node.text_content or ""))  # type: ignore[attr-defined]
            continue
        if tag == "pre":
            parts.append("\n" + (node.text(deep=True) or "") + "\n")  # type: ignore[attr-defined]
            continue
        if tag in _SKIPPED_TAGS or tag == "-comment" or _is_furniture(node, tag, root):
            continue
        if tag in _BLOCK_TAGS:
            parts.append("\n- " if tag == "li" else "\n")
            stack.append((None, depth))
        if tag in ("td", "th"):
            parts.append(" | ")
        children = []
        child = node.child  # type: ignore[attr-defined]
        while child is not None:
            children.append(child)
            child = child.next
        stack.extend((c, depth + 1) for c in reversed(children))
    return _tidy_lines("".join(parts))


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
    """A menu, a banner, a hidden element, or the page's own header or footer."""
    attributes = node.attributes
    if "hidden" in attributes or attributes.get("aria-hidden") == "true":
        return True
    if (attributes.get("role") or "").lower() in _SKIPPED_ROLES:
        return True
    return tag in _PAGE_FURNITURE and root.tag in ("html", "body", "-document")


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


# A line of a table of contents or an index: words, a leader of dots, a page number.
_LEADER_LINE = re.compile(r"^.*?\S(?:\s*\.){4,}\s*(?:\d{1,4}|[ivxlc]{1,6})\s*$", re.I)
_PAGE_NUMBER = re.compile(r"^\s*(?:\d{1,4}|[ivxlc]{1,6})\s*$", re.I)
_BROKEN_WORD = re.compile(
    r"([a-z])-\n([a-z])"
)  # "manip-\nulation": a word hyphenated at a line end
TOC_SHARE = 0.5  # a page whose lines are mostly leader lines is a contents or index page


def clean_pdf_page(text: str) -> str:
    r"""A PDF page's text without what only a printed page needs: a contents or index page
    becomes nothing, leader lines ("asn1_der_decoding . . . . 20") and lone page numbers go,
    and words hyphenated at a line's end are joined.

    >>> clean_pdf_page("3\nThe manip-\nulation of trees.\nSee asn1_create . . . . . 10")
    'The manipulation of trees.'
    >>> clean_pdf_page("ii\nContents\n1 Intro . . . . . 1\n2 Use . . . . . . 4")
    ''
    """
    lines = [line for line in text.splitlines() if line.strip()]
    leaders = sum(1 for line in lines if _LEADER_LINE.match(line))
    if lines and leaders / len(lines) >= TOC_SHARE:
        return ""
    kept = [line for line in lines if not _LEADER_LINE.match(line)]
    while kept and _PAGE_NUMBER.match(kept[0]):
        kept.pop(0)
    while kept and _PAGE_NUMBER.match(kept[-1]):
        kept.pop()
    return _BROKEN_WORD.sub(r"\1\2", "\n".join(kept))


def _pdf_text(data: bytes, limits: ExtractLimits) -> tuple[str, bool]:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, LimitReachedError, PdfReadError

    # pypdf logs every recoverable defect of a damaged file; the outcome is reported instead.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                # Many PDFs are encrypted with an empty user password only to set permissions.
                opened = bool(reader.decrypt(""))
            except (FileNotDecryptedError, NotImplementedError):
                opened = False
            if not opened:
                raise ExtractionFailed(
                    "the PDF is encrypted with a password; remove the password and upload again"
                )
        page_count = len(reader.pages)
        pages = []
        chars = 0
        for index in range(min(page_count, limits.max_pdf_pages)):
            page_text = clean_pdf_page(reader.pages[index].extract_text() or "")
            pages.append(page_text)
            chars += len(page_text)
            if chars > limits.max_chars:
                return "\n\n".join(pages), True
    except ExtractionFailed:
        raise
    except LimitReachedError:
        raise ExtractionFailed(
            "the PDF inflates past the decompression limit (a compressed stream is far larger "
            "than the file)"
        ) from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ExtractionFailed(f"the PDF could not be read ({exc})") from None
    text = "\n\n".join(pages)
    if not text.strip():
        raise ExtractionFailed("the PDF has no extractable text (a scanned PDF needs OCR)")
    return text, page_count > limits.max_pdf_pages


def _docx_text(data: bytes, limits: ExtractLimits) -> str:
    buffer = io.BytesIO(data)
    if not zipfile.is_zipfile(buffer):
        raise ExtractionFailed("not a valid DOCX file (it is not a zip archive)")
    with zipfile.ZipFile(buffer) as archive:
        entries = archive.infolist()
    if len(entries) > limits.max_archive_entries:
        raise ExtractionFailed(
            f"the DOCX holds {len(entries):,} entries; the limit is "
            f"{limits.max_archive_entries:,} (SUBSPACE_MAX_ARCHIVE_ENTRIES)"
        )
    # Reading a member never yields more than its declared size (zipfile checks it against
    # the CRC), so capping the declared total bounds the memory a zip bomb can take.
    inflated = sum(entry.file_size for entry in entries)
    if inflated > limits.max_archive_inflated_bytes:
        raise ExtractionFailed(
            f"the DOCX inflates to {inflated:,} bytes; the limit is "
            f"{limits.max_archive_inflated_bytes:,} (SUBSPACE_MAX_ARCHIVE_INFLATED_BYTES)"
        )
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ExtractionFailed(f"the DOCX could not be read ({exc})") from None
    blocks = []
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                cells = [" ".join(cell.text.split()) for cell in row.cells]
                blocks.append(" | ".join(cells))
        else:
            blocks.append(block.text)
    return "\n".join(line for line in blocks if line.strip())
