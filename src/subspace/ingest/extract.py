"""Text out of uploaded documents: plain text, Markdown, HTML, PDF and DOCX.

Pure functions of the bytes and the limits; `ingest.isolation` runs them in a child process
so a hostile document cannot take the server's memory or time.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from subspace.ingest.encoding import decode_text
from subspace.ingest.failures import ExtractionFailed
from subspace.ingest.html import html_document
from subspace.ingest.mail import parse_message
from subspace.ingest.outline import OutlineItem
from subspace.splitting import Block, document_text
from subspace.text import clean_text

SNIFF_BYTES = 1024  # PDF allows a little junk before its header
TITLE_CHARS = 300  # a document's own title, cut: it names the file in lists and results

TEXT_SUFFIXES = {".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".org"}
MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
DOCX_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


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
    """A document's text (its blocks, a blank line between each), its blocks with the
    headings above them and their pages, and its own title if it names one."""

    text: str
    truncated: bool
    kind: str
    blocks: list[Block]
    title: str | None = None


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
    if suffix == ".eml" or ctype == "message/rfc822":
        return "mail"
    # A delivery report's fields and other message/* parts are header blocks: text.
    if suffix in TEXT_SUFFIXES or ctype.startswith(("text/", "message/")):
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
    title: str | None = None
    truncated = False
    if kind == "pdf":
        title, blocks, truncated = _pdf_document(data, limits)
    elif kind == "docx":
        title, blocks = _docx_document(data, limits)
    elif kind == "html":
        title, blocks = html_document(decode_text(data), limits.max_html_depth, limits.max_chars)
    elif kind == "mail":
        title, blocks = _mail_document(data, limits)
    else:
        from subspace.ingest.markdown import markdown_plain, parse_markdown
        from subspace.ingest.outline import parse_plain_text

        if kind == "markdown":
            outline = parse_markdown(decode_text(data))
            outline.title = markdown_plain(outline.title)
            _plain_outline(outline.items, markdown_plain)
        else:
            outline = parse_plain_text(decode_text(data))
        title, blocks = outline.title or None, outline_blocks(outline.items)
        if title is not None:  # the document's first line: its words are searched with it
            blocks.insert(0, Block(title, is_heading=True))
    kept: list[Block] = []
    chars = 0
    for block in blocks:
        text = clean_text(block.text)
        cut = chars + len(text) > limits.max_chars
        if cut:
            text = text[: max(0, limits.max_chars - chars)]
        headings = tuple(clean_text(heading) for heading in block.headings)
        kept.append(replace(block, text=text, headings=headings))
        chars += len(text) + 2
        if cut:
            truncated = True
            break
    if title is not None:
        title = " ".join(clean_text(title).split())[:TITLE_CHARS] or None
    return Extracted(document_text(kept), truncated, kind, kept, title)


def _plain_outline(items: list[OutlineItem], plain: Callable[[str], str]) -> None:
    """Each bullet's text as `plain` reads it (a file's text holds words, not markup)."""
    for item in items:
        item.text = plain(item.text)
        _plain_outline(item.children, plain)


def _mail_document(data: bytes, limits: ExtractLimits) -> tuple[str | None, list[Block]]:
    """A message attached to another (a forward, a bounce): titled by its subject, its
    headers, what it says, then what it quotes."""
    parsed = parse_message(data, max_html_depth=limits.max_html_depth)
    headers = [f"{name}: {value}" for name, value in (
        ("From", parsed.sender), ("To", parsed.recipients), ("Subject", parsed.subject),
        ("Date", parsed.sent_at.isoformat() if parsed.sent_at else ""),
    ) if value]  # fmt: skip
    parts = ["\n".join(headers), parsed.body_text, parsed.quoted_text]
    return parsed.subject or None, [Block(part) for part in parts if part.strip()]


def outline_blocks(items: list[OutlineItem], headings: tuple[str, ...] = ()) -> list[Block]:
    """An outline's bullets as blocks: a bullet with bullets under it is a heading."""
    blocks: list[Block] = []
    for item in items:
        if item.children:
            path = (*headings, item.text)
            blocks.append(Block(item.text, path, is_heading=True))
            blocks.extend(outline_blocks(item.children, path))
        else:
            blocks.append(Block(item.text, headings))
    return blocks


# A line of a table of contents or an index: words, a leader of dots, a page number.
_LEADER_LINE = re.compile(r"^.*?\S(?:\s*\.){4,}\s*(?:\d{1,4}|[ivxlc]{1,6})\s*$", re.I)
_PAGE_NUMBER = re.compile(r"^\s*(?:\d{1,4}|[ivxlc]{1,6})\s*$", re.I)
# "manip-\nulation": a word hyphenated at a line end (some writers put a space after the dash)
_BROKEN_WORD = re.compile(r"([a-z])-[ \t]*\n[ \t]*([a-z])")
# A typesetter's ligatures (U+FB00-FB06) as the letters they join: "ﬁle" is found as "file".
_LIGATURES = str.maketrans(
    {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
     "\ufb05": "st", "\ufb06": "st"}
)  # fmt: skip
TOC_SHARE = 0.5  # a page whose lines are mostly leader lines is a contents or index page


def clean_pdf_page(text: str) -> str:
    r"""A PDF page's text without what only a printed page needs: a contents or index page
    becomes nothing, leader lines ("asn1_der_decoding . . . . 20") and lone page numbers go,
    words hyphenated at a line's end are joined, and ligatures are their letters.

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
    return _BROKEN_WORD.sub(r"\1\2", "\n".join(kept)).translate(_LIGATURES)


# A first or last line repeated on this many pages is a running header or footer when it holds
# a page number ("Chapter 2: ASN.1 structure handling 4"); without one, on this share of pages.
RUNNING_MIN_PAGES = 2
RUNNING_SHARE = 0.3
_DIGITS = re.compile(r"\d+")
_NUMBERED = re.compile(r"^\s*\d{1,4}\b|\b\d{1,4}\s*$")


def drop_running_lines(pages: list[str]) -> list[str]:
    r"""The pages without their running headers and footers: a first or last line that recurs
    (numbers aside) on several pages.

    >>> drop_running_lines(["Guide 1\nIntro.", "Guide 2\nSetup.", "Guide 3\nUse."])
    ['Intro.', 'Setup.', 'Use.']
    """
    lines = [page.splitlines() for page in pages]
    for end in (0, -1):
        counts: dict[str, int] = {}
        for page in lines:
            if page:
                key = _DIGITS.sub("#", page[end].strip())
                counts[key] = counts.get(key, 0) + 1
        share = max(3, int(RUNNING_SHARE * len(pages)))
        for page in lines:
            if len(page) < 2:
                continue
            line = page[end].strip()
            count = counts[_DIGITS.sub("#", line)]
            numbered = bool(_NUMBERED.search(line))
            if count >= share or (numbered and count >= RUNNING_MIN_PAGES):
                page.pop(end)
    return ["\n".join(page) for page in lines]


def running_title(pages: list[str]) -> str | None:
    r"""The running header that names the document: a first line without numbers repeated on
    most pages ("Shared MIME-info Database"), for a PDF whose metadata has no title.

    >>> running_title(["Guide\nIntro.", "Guide\nSetup.", "Guide\nUse.", "Other\nEnd."])
    'Guide'
    """
    firsts = [page.splitlines()[0].strip() for page in pages if page.strip()]
    counts: dict[str, int] = {}
    for line in firsts:
        if line and not _DIGITS.search(line):
            counts[line] = counts.get(line, 0) + 1
    best = max(counts, key=lambda line: counts[line], default=None)
    if best is None or counts[best] < max(3, len(firsts) // 2):
        return None
    return best


TITLE_PAGE_LINES = 12  # a first page this short is a title page: its first line is the title
TITLE_PAGE_MIN_PAGES = 3  # a document this long may open with a title page; a note does not


def title_page_title(pages: list[str]) -> str | None:
    r"""The first line of a title page (a first page of a few short lines in a document of
    several pages), if the PDF has one.

    >>> title_page_title(["Libtasn1\nASN.1 library for the GNU system", "1 Intro", "2 Use"])
    'Libtasn1'
    >>> title_page_title(["Ferry times: every 20 minutes"]) is None
    True
    """
    if len(pages) < TITLE_PAGE_MIN_PAGES:
        return None
    first = next((page for page in pages if page.strip()), "")
    lines = [line.strip() for line in first.splitlines() if line.strip()]
    if not lines or len(lines) > TITLE_PAGE_LINES or len(lines[0]) > 100:
        return None
    return lines[0] if re.search(r"[^\W\d_]", lines[0]) else None


def _pdf_document(data: bytes, limits: ExtractLimits) -> tuple[str | None, list[Block], bool]:
    """A PDF's title (its metadata's, else its running header's, else its title page's first
    line), and a block per page, under the headings its outline (bookmarks) gives that page."""
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
            page_text = reader.pages[index].extract_text() or ""
            pages.append(page_text)
            chars += len(page_text)
            if chars > limits.max_chars:
                break
        title = _pdf_title(reader) or running_title(pages) or title_page_title(pages)
        headings = _pdf_headings(reader, len(pages))
    except ExtractionFailed:
        raise
    except LimitReachedError:
        raise ExtractionFailed(
            "the PDF inflates past the decompression limit (a compressed stream is far larger "
            "than the file)"
        ) from None
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise ExtractionFailed(f"the PDF could not be read ({exc})") from None
    cleaned = [clean_pdf_page(page) for page in drop_running_lines(pages)]
    blocks = [
        Block(text, headings[n], page=n + 1) for n, text in enumerate(cleaned) if text.strip()
    ]
    if not blocks:
        raise ExtractionFailed("the PDF has no extractable text (a scanned PDF needs OCR)")
    return title, blocks, chars > limits.max_chars or page_count > limits.max_pdf_pages


def _pdf_title(reader: Any) -> str | None:
    metadata = reader.metadata
    title = str(metadata.title or "").strip() if metadata is not None else ""
    # Word names an untitled export after its file: that is no title.
    if not title or re.search(r"\.(?:docx?|pdf|rtf|odt|tex|dvi)$", title, re.I):
        return None
    return title


MAX_OUTLINE_ENTRIES = 10_000  # a bookmark tree larger than a real book's is read no further


def _pdf_headings(reader: Any, pages: int) -> list[tuple[str, ...]]:
    """For each page, the path of outline entries (chapter, section) open on it."""
    entries: list[tuple[int, tuple[str, ...]]] = []
    stack: list[tuple[list[Any], tuple[str, ...]]] = [(list(reader.outline), ())]
    last: tuple[str, ...] = ()
    while stack and len(entries) < MAX_OUTLINE_ENTRIES:
        items, parents = stack.pop()
        if not items:
            continue
        item, rest = items[0], items[1:]
        stack.append((rest, parents))
        if isinstance(item, list):
            stack.append((item, last))  # the children of the entry just read
            continue
        page = reader.get_destination_page_number(item)
        last = (*parents, " ".join(str(item.title).split()))
        if page is not None and page >= 0:
            entries.append((page, last))
    out: list[tuple[str, ...]] = []
    current: tuple[str, ...] = ()
    by_page: dict[int, tuple[str, ...]] = {}
    for page, path in entries:
        # A page is labelled by the first section starting on it (where its text begins,
        # usually), and the next page by the last (the one open when the page ends).
        by_page.setdefault(page, path)
    last_on: dict[int, tuple[str, ...]] = {page: path for page, path in entries}
    for page in range(pages):
        out.append(by_page.get(page, current))
        current = last_on.get(page, current)
    return out


def _docx_document(data: bytes, limits: ExtractLimits) -> tuple[str | None, list[Block]]:
    """A DOCX's title (its properties', or its Title paragraph) and its blocks: headings
    from the Heading styles, list paragraphs as "- " items, a table as one block."""
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
    title = " ".join((document.core_properties.title or "").split()) or None
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    for part in document.iter_inner_content():
        path = tuple(h for _, h in headings)
        if isinstance(part, Table):
            rows = [" | ".join(" ".join(c.text.split()) for c in row.cells) for row in part.rows]
            blocks.append(Block("\n".join(rows), path))
            continue
        text = " ".join(part.text.split())
        if not text:
            continue
        style = (part.style.name if part.style is not None else "") or ""
        level = _docx_heading_level(style)
        if style == "Title":
            title = title or text
            continue
        if level is not None:
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, text))
            blocks.append(Block(text, tuple(h for _, h in headings), is_heading=True))
        elif style.startswith("List") or _is_numbered(part):
            blocks.append(Block(f"- {text}", path))
        else:
            blocks.append(Block(text, path))
    return title, blocks


def _is_numbered(paragraph: Any) -> bool:
    """Whether a paragraph is an item of a bulleted or numbered list by its own numbering."""
    properties = paragraph._p.pPr
    return properties is not None and properties.numPr is not None


def _docx_heading_level(style: str) -> int | None:
    """1 for "Heading 1" and so on; None for a style that is no heading."""
    match = re.fullmatch(r"Heading (\d)", style)
    return int(match.group(1)) if match else None
