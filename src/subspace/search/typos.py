"""Typo tolerance: a query word that no document contains is matched to close words that do.

Candidates are the words the workspace's documents hold as they are spelled (search.words,
migration 0019), not the stems of its vocabulary: "hydratoin" is one edit from "hydration"
and three from its stem "hydrat". They share the typed word's first two letters (or its
first, then its next two swapped) and about its length; the closest by Damerau-Levenshtein
distance wins, the more frequent lexeme on a tie. The winner's lexeme is searched for, and
the winner is what the user is told: "biomateirals" -> "biomaterials", a real word.
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


# The workspace's words worth comparing with `w` (the typed word, folded and lower-cased, as
# documents' words are) whose lexeme is `typed`, with their lexemes and the documents holding
# each lexeme. Null unless `w` is a word of letters, long enough, whose lexeme no document of
# the workspace holds: a word the workspace holds is never corrected.
#
# Candidates share its first two letters (or its first, then its next two swapped: a second
# range only when those differ, or it would lie inside the first) and are as long within its
# max_distance. Each letter of a candidate that `w` lacks, and each letter of `w` the
# candidate lacks, costs an edit, so translate() drops, in C, the candidates too far apart
# (three in four on SciFact) before Python measures the rest (docs/benchmarks.md, "Typo
# tolerance"). Words of a lexeme no document holds any more are left out. Binds %(ws)s.
CANDIDATES_SQL = f"""
    select array_agg(c.word order by c.word) as candidates,
           array_agg(c.lexeme order by c.word) as candidate_lexemes,
           array_agg(c.ndoc order by c.word) as candidate_ndocs
    from (select case when char_length(w) <= {SHORT_WORD} then 1 else 2 end as n) limit_of,
    lateral (
        select distinct d.word, d.lexeme, (
            select coalesce(sum(t.ndoc), 0) from search.term_stats t
            where t.workspace_id = %(ws)s and t.lexeme = d.lexeme) as ndoc
        from search.words d, (values
            (left(w, {PREFIX})),
            (case when substr(w, 2, 1) <> substr(w, 3, 1)
                  then left(w, 1) || substr(w, 3, 1) || substr(w, 2, 1) end)) prefix(p)
        where d.workspace_id = %(ws)s and d.word >= prefix.p collate "C"
        and d.word < (prefix.p || chr(1114111)) collate "C"
        and abs(char_length(d.word) - char_length(w)) <= limit_of.n
        and char_length(translate(d.word, w, '')) <= limit_of.n
        and char_length(translate(w, d.word, '')) <= limit_of.n
        offset 0
    ) c
    where c.ndoc > 0
    and char_length(w) >= {MIN_WORD} and w ~ '^[[:alpha:]]+$' and not exists (
        select 1 from search.term_stats k
        where k.workspace_id = %(ws)s and k.lexeme = typed and k.ndoc > 0)
"""


def best_correction(word: str, candidates: dict[str, int]) -> str | None:
    """The closest of `candidates` (a workspace word -> the documents holding its lexeme) to
    `word` within its max_distance, the more frequent on a tie; None when none is that close.

    >>> best_correction("hydratoin", {"hydration": 3, "hydrating": 5, "hydrate": 9})
    'hydration'
    """
    limit = max_distance(word)
    best: tuple[int, int, str] | None = None
    for candidate, ndoc in candidates.items():
        distance = damerau_levenshtein(word, candidate, limit)
        if distance <= limit:
            key = (distance, -ndoc, candidate)
            best = key if best is None or key < best else best
    return None if best is None else best[2]
