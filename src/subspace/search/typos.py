"""Typo tolerance: a query word that no document contains is matched to close words that do.

Candidates come from the workspace's vocabulary (search.term_stats) sharing the word's first
two letters (or its first, then its next two swapped) and about its length; the closest by
Damerau-Levenshtein distance wins, the more frequent on a tie. So "biomateirals" finds
"biomaterials" without the vector leg.
"""

from __future__ import annotations

from uuid import UUID

from subspace.db.pool import Conn

MIN_WORD = 4  # shorter words are too often a different word one edit away
PREFIX = 2  # letters a candidate shares; typos rarely hit the first (see prefixes)


def prefixes(word: str) -> tuple[str, str]:
    """LIKE patterns for the vocabulary words worth comparing: those sharing the first two
    letters, and those whose second and third letters are these two swapped."""
    return f"{word[:PREFIX]}%", f"{word[0]}{word[2]}{word[1]}%"


def max_distance(word: str) -> int:
    return 1 if len(word) <= 5 else 2


def damerau_levenshtein(a: str, b: str, limit: int) -> int:
    """Edit distance with transpositions; anything over `limit` returns limit + 1."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous_row: list[int] | None = None
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if (previous_row is not None and i > 1 and j > 1 and a[i - 1] == b[j - 2]
                    and a[i - 2] == b[j - 1]):  # fmt: skip
                current[j] = min(current[j], previous_row[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        previous_row, row = row, current
    return row[-1]


def correct_lexemes(conn: Conn, workspace_id: UUID, lexemes: list[str]) -> dict[str, str]:
    """For each lexeme absent from the workspace's vocabulary, its closest present lexeme."""
    words = sorted({w for w in lexemes if len(w) >= MIN_WORD and w.isalpha()})
    if not words:
        return {}
    known = {
        r["lexeme"]
        for r in conn.execute(
            "select distinct lexeme from search.term_stats where workspace_id = %s "
            "and lexeme = any(%s) and ndoc > 0",
            (workspace_id, words),
        )
    }
    found: dict[str, str] = {}
    for word in words:
        if word in known:
            continue
        limit = max_distance(word)
        rows = conn.execute(
            "select lexeme, sum(ndoc) as ndoc from search.term_stats where workspace_id = %s "
            "and (lexeme like %s or lexeme like %s) and length(lexeme) between %s and %s "
            "and ndoc > 0 group by lexeme",
            (workspace_id, *prefixes(word), len(word) - limit, len(word) + limit),
        ).fetchall()
        best: tuple[int, int, str] | None = None
        for row in rows:
            distance = damerau_levenshtein(word, row["lexeme"], limit)
            if distance <= limit:
                key = (distance, -int(row["ndoc"]), row["lexeme"])
                best = key if best is None or key < best else best
        if best is not None:
            found[word] = best[2]
    return found
