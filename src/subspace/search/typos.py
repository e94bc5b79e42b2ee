"""Typo tolerance: a query word that no document contains is matched to close words that do.

Candidates come from the workspace's vocabulary (search.term_stats) sharing the word's first
two letters (or its first, then its next two swapped) and about its length; the closest by
Damerau-Levenshtein distance wins, the more frequent on a tie. So "biomateirals" finds
"biomaterials" without the vector leg.
"""

from __future__ import annotations

MIN_WORD = 4  # shorter words are too often a different word one edit away
PREFIX = 2  # letters a candidate shares; typos rarely hit the first (see CANDIDATES_SQL)
SHORT_WORD = 5  # words up to this long may be one edit off, longer ones two


def max_distance(word: str) -> int:
    return 1 if len(word) <= SHORT_WORD else 2


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


# The vocabulary words worth comparing with `w` (a lexeme, as the outer query names it), per
# source with their document counts: unknown to the workspace, alphabetic and long enough, it
# is compared with the words sharing its first two letters (or its first, then its next two
# swapped) and about its length. Range conditions rather than LIKE, so the prefix index is
# walked for each word of the query in one statement. Binds %(ws)s; null for a known word.
CANDIDATES_SQL = f"""
    select array_agg(c.lexeme order by c.lexeme) as candidates,
           array_agg(c.ndoc order by c.lexeme) as candidate_ndocs
    from (
        select p.lexeme, sum(p.ndoc) as ndoc from (
            select t.source, t.lexeme, t.ndoc from search.term_stats t, (values
                (left(w, {PREFIX})),
                (left(w, 1) || substr(w, 3, 1) || substr(w, 2, 1))) prefix(p)
            where t.workspace_id = %(ws)s and t.lexeme ~>=~ prefix.p
            and t.lexeme ~<~ (prefix.p || chr(1114111)) and t.ndoc > 0
            group by t.source, t.lexeme, t.ndoc
        ) p
        where abs(char_length(p.lexeme) - char_length(w))
              <= case when char_length(w) <= {SHORT_WORD} then 1 else 2 end
        group by p.lexeme
    ) c
    where char_length(w) >= {MIN_WORD} and w ~ '^[[:alpha:]]+$' and not exists (
        select 1 from search.term_stats k
        where k.workspace_id = %(ws)s and k.lexeme = w and k.ndoc > 0)
"""


def best_correction(word: str, candidates: dict[str, int]) -> str | None:
    """The closest of `candidates` (vocabulary lexeme -> document count) to `word` within its
    max_distance, the more frequent on a tie; None when none is that close."""
    limit = max_distance(word)
    best: tuple[int, int, str] | None = None
    for lexeme, ndoc in candidates.items():
        distance = damerau_levenshtein(word, lexeme, limit)
        if distance <= limit:
            key = (distance, -ndoc, lexeme)
            best = key if best is None or key < best else best
    return None if best is None else best[2]
