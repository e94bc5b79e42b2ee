"""Splitting a long text into pieces of about a size, on paragraph, then sentence, then word
boundaries: extraction stores a file's text in these pieces, and the indexer embeds each."""

from __future__ import annotations

import re

FILE_CHUNK_CHARS = 1_000  # target size of a file chunk
FILE_CHUNK_MAX_CHARS = 1_500  # a sentence longer than this is cut at a word boundary

_PARAGRAPH = re.compile(r"\n\s*\n")
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
