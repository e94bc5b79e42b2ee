"""Splitting a document into pieces of about a size: its blocks (paragraphs, items, tables)
grouped within their sections, a long block on sentence, then word boundaries. Extraction
stores a file's text in these pieces, each with the headings above it and its page, and the
indexer embeds each."""

from __future__ import annotations

import re
from dataclasses import dataclass

FILE_CHUNK_CHARS = 1_000  # target size of a file chunk
FILE_CHUNK_MAX_CHARS = 1_500  # a sentence longer than this is cut at a word boundary

# A piece that reaches this size ends at the next heading rather than run into its section.
SECTION_MIN_CHARS = 300
CRUMB_CHARS = 80  # a heading in a breadcrumb, cut to this many characters

_PARAGRAPH = re.compile(r"\n\s*\n")


@dataclass(frozen=True)
class Block:
    """One block of a document as extraction reads it: a paragraph, a list item, a table, a
    heading (`is_heading`), with the headings it sits under (its own last, for a heading) and
    the page it is on (PDF)."""

    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None
    is_heading: bool = False


@dataclass(frozen=True)
class Piece:
    """One stored chunk of a file: its text, the headings above where it starts, its page."""

    text: str
    headings: tuple[str, ...] = ()
    page: int | None = None


def document_text(blocks: list[Block]) -> str:
    """The whole text of a document: its blocks, a blank line between each."""
    return "\n\n".join(block.text for block in blocks if block.text.strip())


def split_blocks(
    blocks: list[Block], target: int = FILE_CHUNK_CHARS, hard_max: int = FILE_CHUNK_MAX_CHARS
) -> list[Piece]:
    """Group a document's blocks into pieces of about `target` characters. A piece ends at a
    block's end, never inside one unless the block alone is longer than `target` (then it is
    cut at sentences, see `split_text`), and at a heading once it holds `SECTION_MIN_CHARS`,
    so a section starts a piece and a short one shares with the next. Each piece carries the
    headings of where it starts and its first block's page. The same blocks always give the
    same pieces.

    >>> [p.headings for p in split_blocks([Block("Intro", ("Intro",), is_heading=True),
    ...     Block("Hello.", ("Intro",))], target=100)]
    [('Intro',)]
    """
    pieces: list[Piece] = []
    current: list[Block] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current:
            first = current[0]
            text = "\n\n".join(block.text for block in current)
            pieces.append(Piece(text, _crumbs(first.headings), first.page))
        current, size = [], 0

    for block in blocks:
        text = block.text.strip()
        if not text:
            continue
        if block.is_heading and size >= SECTION_MIN_CHARS:
            flush()
        if len(text) > target:
            flush()
            for part in split_text(text, target, hard_max):
                pieces.append(Piece(part, _crumbs(block.headings), block.page))
            continue
        if current and size + len(text) + 2 > target:
            flush()
        current.append(Block(text, block.headings, block.page, block.is_heading))
        size += len(text) + 2
    flush()
    return pieces


def _crumbs(headings: tuple[str, ...]) -> tuple[str, ...]:
    cut = (" ".join(h.split()) for h in headings)
    return tuple(h if len(h) <= CRUMB_CHARS else h[: CRUMB_CHARS - 1] + "…" for h in cut)


_SENTENCE = re.compile(r"(?<=[.!?…])\s+")


def split_text(
    text: str, target: int = FILE_CHUNK_CHARS, hard_max: int = FILE_CHUNK_MAX_CHARS
) -> list[str]:
    """Split text into pieces of about `target` characters on paragraph, then sentence,
    boundaries. The same text always gives the same pieces.

    >>> split_text("One. Two.\\n\\nThree.", target=10)
    ['One. Two.', 'Three.']
    """
    units: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= target:
            units.append(paragraph)
            continue
        for sentence in _SENTENCE.split(paragraph):
            units.extend(_cut_long(sentence.strip(), target, hard_max))
    pieces: list[str] = []
    current = ""
    for unit in units:
        if not unit:
            continue
        joined = f"{current}\n\n{unit}" if current else unit
        if current and len(joined) > target:
            pieces.append(current)
            current = unit
        else:
            current = joined
    if current:
        pieces.append(current)
    return pieces


def _cut_long(sentence: str, target: int, hard_max: int) -> list[str]:
    """A sentence longer than `hard_max`, cut at word boundaries near `target`."""
    if len(sentence) <= hard_max:
        return [sentence]
    pieces = []
    while len(sentence) > hard_max:
        cut = sentence.rfind(" ", 0, target)
        if cut <= 0:
            cut = target
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    pieces.append(sentence)
    return pieces
