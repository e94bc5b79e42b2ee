"""BM25 as the lexical engine computes it, declared once: the constants, idf, a document
length as the engine stores it, and one term's part of a score. Pure: no I/O.

The engine (Tantivy) keeps each document's length in one byte: exact up to 40 tokens, then
on a scale whose steps double every eight values (42, 44, ... 56, 60, 64, ... 88, 96, ...).
The delta and the fallback score with the same quantized length (`search.bm25_term`,
migration 0021), so a document scores the same whichever side ranks it.
"""

from __future__ import annotations

import bisect
import math

K1 = 1.2  # term-frequency saturation (Lucene's and Tantivy's default)
B = 0.75  # strength of document-length normalisation
EXACT_LENGTHS = 40  # lengths stored exactly; longer ones are rounded down to the scale
LENGTH_CODES = 256  # one byte per document


def _length_scale() -> tuple[int, ...]:
    """The lengths a stored length code stands for, ascending: 0..40, then eight values per
    power of two, 2^g * (9 + j) + 24 for j in 0..7."""
    scale = list(range(EXACT_LENGTHS + 1))
    g = 1
    while len(scale) < LENGTH_CODES:
        scale.extend(2**g * (9 + j) + 24 for j in range(8))
        g += 1
    return tuple(scale[:LENGTH_CODES])


LENGTH_SCALE = _length_scale()


def stored_length(length: int) -> int:
    """The document length the engine scores with: `length` rounded down to its scale.

    >>> stored_length(40), stored_length(41), stored_length(59), stored_length(60)
    (40, 40, 56, 60)
    """
    return LENGTH_SCALE[bisect.bisect_right(LENGTH_SCALE, max(0, length)) - 1]


def idf(documents: int, holding: int) -> float:
    """ln(1 + (N - n + 0.5) / (n + 0.5)): positive however common the term."""
    return math.log(1.0 + (documents - holding + 0.5) / (holding + 0.5))


def term_score(weight: float, tf: int, length: int, average_length: float) -> float:
    """One term's part of a document's score: `weight` (idf times how often the query has the
    term) times (k1 + 1) tf / (tf + k1 (1 - b + b len / avgdl)), len as the engine stores it."""
    if tf <= 0 or weight <= 0:
        return 0.0
    norm = K1 * (1.0 - B + B * stored_length(length) / average_length)
    return weight * (K1 + 1.0) * tf / (tf + norm)
