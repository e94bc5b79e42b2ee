"""The query as lexical terms: what Postgres's analysis makes of each word and phrase, the typo
corrections, and the statistics BM25 weighs them by.

Postgres analyses the query as it analyses documents (search.fold, then the english
configuration), so the engine and the tables agree token for token. One statement per search
returns, for each word or phrase typed, its lexemes at their positions, the tsquery Postgres
prints for it (for the SQL that still matches with tsqueries: the delta, highlights, explain),
the documents of each source holding each lexeme, and the typo candidates of an unknown word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from subspace.db.pipeline import Later, prepared
from subspace.db.pool import Conn
from subspace.search.query import ParsedQuery
from subspace.search.typos import CANDIDATES_SQL, MIN_WORD, best_correction

CONFIG = "english"
# What joins an identifier's parts (search.identifier_parts splits documents' tokens at them):
# "draft-ietf-mboned-mix" is also the phrase of its parts, so it finds the document holding
# "draft-ietf-mboned-mix-00.txt", which Postgres reads as one token.
IDENTIFIER_SEPARATORS = "[-./@:_\\\\]+"

Frequencies = dict[str, int]  # BM25 source -> documents holding a lexeme


@dataclass(frozen=True)
class Phrase:
    """One word or phrase of the query as the engine matches it: its lexemes at their
    positions, the first at 0 ("state of the art" -> (0, state), (3, art); a word is one),
    and the lexeme of the word a typo was corrected to, matched instead as well."""

    words: tuple[tuple[int, str], ...]
    correction: str | None = None

    @property
    def lexemes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*(w for _, w in self.words), *filter(None, [self.correction])]))


@dataclass(frozen=True)
class SourceSize:
    """A BM25 source's documents in the workspace and their total length in lexemes."""

    documents: int
    total_length: int

    @property
    def average_length(self) -> float:
        return max(self.total_length / self.documents, 1.0) if self.documents else 1.0


@dataclass(frozen=True, kw_only=True)
class TsQueries:
    """The query as terms: tsqueries (any word, every clause, exclusions) for the SQL that
    matches with them, the phrases the engine matches (per clause, and excluded), the lexemes
    BM25 sums with how often the query repeats each, and the typo corrections applied (query
    lexeme -> vocabulary lexeme, and the word typed -> the workspace's word).

    `frequencies` holds, per lexeme, the workspace's documents holding it in each source, and
    `sizes` each source's documents and length: the statistics BM25 weighs by, current at
    the search's start. `spelled` says which word of the query gave each lexeme.
    """

    any_words: str = ""  # empty: the query has no terms (TsQueries() is such a query)
    all_words: str = ""
    excluded: str = ""
    lexemes: tuple[str, ...] = ()
    corrections: dict[str, str] = field(default_factory=dict)
    corrected_words: dict[str, str] = field(default_factory=dict)
    # Words no document holds and no workspace word is close to: while one is left, the query
    # is not one a correction makes plausible, and none is applied (gibberish finds nothing).
    unknown: tuple[str, ...] = ()
    clauses: tuple[tuple[Phrase, ...], ...] = ()
    negated: tuple[Phrase, ...] = ()
    repeats: tuple[int, ...] = ()
    phrases: bool = False
    frequencies: dict[str, Frequencies] = field(default_factory=dict)
    sizes: dict[str, SourceSize] = field(default_factory=dict)
    spelled: tuple[str, ...] = ()

    def repeat(self, index: int) -> int:
        """How often tsq.lexemes[index] occurs in the query (1 when not recorded)."""
        return self.repeats[index] if index < len(self.repeats) else 1

    def held(self, lexeme: str, source: str) -> int:
        """How many of the workspace's documents of `source` hold `lexeme`."""
        return self.frequencies.get(lexeme, {}).get(source, 0)

    def postings(self, lexeme: str) -> int:
        """How many documents of the workspace hold `lexeme`, all sources together."""
        return sum(self.frequencies.get(lexeme, {}).values())

    @property
    def is_empty(self) -> bool:
        return not self.any_words


def build_tsqueries(
    conn: Conn, parsed: ParsedQuery, workspace_id: UUID | None = None, *, typos: bool = True
) -> TsQueries:
    """Let Postgres analyse each term, then combine them (see `queue_tsqueries`)."""
    return queue_tsqueries(conn, parsed, workspace_id, typos=typos).result()


def queue_tsqueries(
    conn: Conn, parsed: ParsedQuery, workspace_id: UUID | None = None, *, typos: bool = True
) -> Later[TsQueries]:
    """The query's terms as one statement, queued, and the sources' sizes as another.

    A term of stopwords only contributes nothing; an identifier stays one phrase. With
    `typos`, a single word that no document of the workspace contains also matches the
    lexeme of the closest word its documents hold (search/typos.py); a passage is not
    corrected. Postgres prints each term's tsquery, so the combinations built here from
    that text always parse.
    """
    if parsed.is_empty:
        return Later(lambda: TsQueries())
    texts = list(dict.fromkeys([*parsed.alternatives, *parsed.negated]))
    # A pasted passage is searched as written: its corrections are all or none (see
    # `_tsqueries`), and forty words hold a name or a term no document has, so none of
    # ArguAna's 1,406 was ever corrected, while looking cost most of a long query's time
    # (docs/benchmarks.md, "Two tenants: shares over the host, requests first").
    typos = typos and workspace_id is not None and not parsed.is_passage
    # Only a single word of the query is corrected, never an excluded one.
    single = [typos and t in parsed.alternatives and " " not in t.strip() for t in texts]
    # search.fold, as for documents (migration 0009): accents folded, CJK runs as bigrams, so
    # a CJK term is the phrase of its bigrams. Identifier parts are only added to documents:
    # a whole identifier stays the phrase of its own tokens.
    # Each lexeme with its positions, and the documents of each source holding it. A single
    # word is also read as search.spelled_words reads documents' words (migration 0019: its
    # one token in the simple configuration), for typo tolerance to compare with theirs.
    frequencies = (
        "(select coalesce(jsonb_object_agg(s.source, s.ndoc) filter (where s.ndoc > 0), "
        "'{}'::jsonb) from search.term_stats s where s.workspace_id = %(ws)s and s.lexeme = LEXEME)"
    )
    sql = (
        "select t, coalesce(v.l, '{}') as l, coalesce(v.n, '{}') as n, "
        "coalesce(v.df, '{}') as df, coalesce(seq.w, '{}') as seq_w, "
        "coalesce(seq.p, '{}') as seq_p, "
        "coalesce(parts.w, '{}') as parts_w, coalesce(parts.p, '{}') as parts_p, "
        "coalesce(parts.l, '{}') as parts_l, coalesce(parts.df, '{}') as parts_df, "
        f"case when pf <> f then phraseto_tsquery('{CONFIG}', pf)::text else '' end as pq, "
        f"phraseto_tsquery('{CONFIG}', f)::text as q, typo.w, typo.candidates, "
        "typo.candidate_lexemes, typo.candidate_ndocs, typo.candidate_frequencies "
        "from unnest(%(texts)s::text[], %(single)s::boolean[]) with ordinality u(t, single, i) "
        "cross join lateral (select search.fold(t) as f offset 0) folded "
        "cross join lateral (select array_agg(w.lexeme order by w.lexeme) as l, "
        "array_agg(coalesce(array_length(w.positions, 1), 1) order by w.lexeme) as n, "
        f"array_agg({frequencies.replace('LEXEME', 'w.lexeme')} order by w.lexeme) as df "
        f"from unnest(to_tsvector('{CONFIG}', f)) w) v "
        "cross join lateral (select array_agg(w.lexeme order by p) as w, "
        "array_agg(p order by p) as p "
        f"from unnest(to_tsvector('{CONFIG}', f)) w, unnest(w.positions) p) seq "
        f"cross join lateral (select regexp_replace(f, '{IDENTIFIER_SEPARATORS}', ' ', 'g') "
        "as pf offset 0) parted "
        # The parts' vector is analysed once, and only for a term that has parts.
        f"cross join lateral (select case when pf <> f then to_tsvector('{CONFIG}', pf) end "
        "as pv offset 0) parts_vector "
        "left join lateral (select array_agg(w.lexeme order by p) as w, "
        "array_agg(p order by p) as p, (select array_agg(n.lexeme order by n.lexeme) "
        "from unnest(pv) n where not n.lexeme = any(coalesce(v.l, '{}'))) as l, "
        f"(select array_agg({frequencies.replace('LEXEME', 'n.lexeme')} order by n.lexeme) "
        "from unnest(pv) n where not n.lexeme = any(coalesce(v.l, '{}'))) as df "
        "from unnest(pv) w, unnest(w.positions) p) parts on true "
        "left join lateral (select * from (select v.l[1] as typed, (select min(s) from "
        "unnest(tsvector_to_array(to_tsvector('simple', f))) s having count(*) = 1) as w "
        "where u.single and cardinality(v.l) = 1 offset 0) word, lateral "
        f"({CANDIDATES_SQL}) found, lateral (select array_agg("
        f"{frequencies.replace('LEXEME', 'c.lexeme')} order by c.ord) as candidate_frequencies "
        "from unnest(found.candidate_lexemes) with ordinality c(lexeme, ord)) cf) typo on true "
        "order by i"
    )
    params = {"texts": texts, "single": single, "ws": workspace_id}
    terms = prepared(conn, sql, params, lambda rows: rows)
    sizes = prepared(
        conn,
        "select source, ndocs, total_len from search.source_stats where workspace_id = %s",
        (workspace_id,),
        lambda rows: {r["source"]: SourceSize(r["ndocs"], r["total_len"]) for r in rows},
    )
    return Later(lambda: _tsqueries(parsed, terms.result(), sizes.result()))


def _corrections(
    rows: list[dict[str, Any]],
) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """The typos' corrections, from each unknown word's candidates: lexeme -> its correction's
    lexeme, word as typed -> the word shown instead, and each correction's frequencies."""
    corrections: dict[str, str] = {}
    corrected_words: dict[str, str] = {}
    frequencies: dict[str, dict[str, int]] = {}
    for r in rows:
        if not r["candidates"]:
            continue
        ndocs = dict(zip(r["candidates"], map(int, r["candidate_ndocs"]), strict=True))
        found = best_correction(r["w"], ndocs)
        if found is not None:
            index = r["candidates"].index(found)
            lexeme = r["candidate_lexemes"][index]
            corrections[r["l"][0]] = lexeme
            corrected_words[r["t"].strip()] = found
            frequencies[lexeme] = dict(r["candidate_frequencies"][index])
    return corrections, corrected_words, frequencies


def _tsqueries(
    parsed: ParsedQuery, rows: list[dict[str, Any]], sizes: dict[str, SourceSize]
) -> TsQueries:
    lexemes_of = {r["t"]: list(r["l"]) for r in rows}
    counts_of = {r["t"]: dict(zip(r["l"], r["n"], strict=True)) for r in rows}
    tsquery_of: dict[str, str] = {r["t"]: r["q"] for r in rows}
    frequencies = {w: dict(f) for r in rows for w, f in zip(r["l"], r["df"], strict=True)}
    sequence_of = {r["t"]: tuple(zip(r["seq_p"], r["seq_w"], strict=True)) for r in rows}
    # An identifier's parts, as a phrase of their own, and the lexemes only they hold (the
    # parts of "asn1_der_decoding", which Postgres keeps as one lexeme).
    parts_of = {r["t"]: tuple(zip(r["parts_p"], r["parts_w"], strict=True)) for r in rows}
    part_lexemes_of = {r["t"]: list(r["parts_l"]) for r in rows}
    frequencies |= {w: dict(f) for r in rows for w, f in zip(r["parts_l"], r["parts_df"],
                                                              strict=True)}  # fmt: skip
    parts_tsquery_of: dict[str, str] = {r["t"]: r["pq"] for r in rows}
    corrections, corrected_words, corrected_frequencies = _corrections(rows)
    # A correction is applied only when every word no document holds has one: "zqxwv flurbo"
    # is not "zqxwv flurry", it is gibberish (the relevance issue's rule). A word too short
    # to be corrected at all does not count: "hte borow checker" is "hte borrow checker".
    unknown = tuple(
        t.strip() for t in parsed.alternatives
        if lexemes_of[t]
        and not any(frequencies.get(w) for w in [*lexemes_of[t], *part_lexemes_of[t]])
        and not (len(lexemes_of[t]) == 1 and lexemes_of[t][0] in corrections)
    )  # fmt: skip
    if any(len(word) >= MIN_WORD for word in unknown):
        corrections, corrected_words, corrected_frequencies = {}, {}, {}
    frequencies |= corrected_frequencies

    def correction_of(text: str) -> str | None:
        words = lexemes_of[text]
        return corrections.get(words[0]) if len(words) == 1 else None

    def by_parts(text: str) -> bool:
        """Whether the identifier `text` is also searched by its parts: when no document holds
        it whole, they are all the query has ("ffi_prep_closure" in "ffi_prep_closure_loc",
        "draft-ietf-mboned-mix" in "draft-ietf-mboned-mix-00.txt"). Held whole ("crates.io"),
        it is searched as typed, and its parts in a file name do not outrank it."""
        whole = [w for _, w in sequence_of[text] if re.search(IDENTIFIER_SEPARATORS, w)]
        # A number ("0.87", "1.5") is no identifier: its parts would score digits.
        named = any(re.search(r"[^\W\d_]", w) for w in whole)
        return bool(parts_of[text]) and named and not all(frequencies.get(w) for w in whole)

    def term(text: str) -> str:
        correction = correction_of(text)
        query = tsquery_of[text]
        if not query:
            return query
        if by_parts(text) and parts_tsquery_of[text] != query:
            return f"( {query} ) | ( {parts_tsquery_of[text]} )"
        if correction is None:
            return query
        return f"( {query} ) | {tsquery_literal(correction)}"

    def phrase(text: str, correction: str | None = None) -> Phrase:
        return _phrase(sequence_of[text], correction)

    def phrases(text: str) -> tuple[Phrase, ...]:
        """The term as the engine matches it: its phrase, or for an identifier that phrase or
        the phrase of its parts."""
        whole = phrase(text, correction_of(text))
        parts = _phrase(parts_of[text]) if by_parts(text) else whole
        return (whole,) if parts == whole else (whole, parts)

    def matched_by(text: str) -> tuple[str, ...]:
        correction = correction_of(text)
        return (*lexemes_of[text], *part_lexemes_of[text], *([correction] if correction else []))

    # Every occurrence of an alternative counts, with each of its lexemes as often as its
    # text has it; a typo's correction counts as often as the word it corrects.
    repeats: dict[str, int] = {}
    # The word that gave each lexeme: a word of the query's own before a typo it corrects.
    spelled = {w: t for t in reversed(parsed.alternatives) for w in matched_by(t)}
    spelled |= {w: t for t in reversed(parsed.alternatives) for w in lexemes_of[t]}
    for text in parsed.alternatives:
        if term(text):
            for lexeme, count in counts_of[text].items():
                repeats[lexeme] = repeats.get(lexeme, 0) + count
            if by_parts(text):
                for lexeme in part_lexemes_of[text]:
                    repeats[lexeme] = repeats.get(lexeme, 0) + 1
            if correction := correction_of(text):
                repeats[correction] = (
                    repeats.get(correction, 0) + counts_of[text][lexemes_of[text][0]]
                )
    lexemes = tuple(sorted(repeats))
    clauses = tuple(
        matched
        for c in parsed.clauses
        if (matched := tuple(p for t in c.alternatives if term(t) for p in phrases(t)))
    )
    return TsQueries(
        any_words=either(term(t) for t in parsed.alternatives),
        all_words=" & ".join(
            f"( {q} )" for c in parsed.clauses if (q := either(map(term, c.alternatives)))
        ),
        excluded=either(tsquery_of[t] for t in parsed.negated),
        lexemes=lexemes,
        corrections=corrections,
        corrected_words=corrected_words,
        unknown=unknown,
        clauses=clauses,
        negated=tuple(phrase(t) for t in parsed.negated if tsquery_of[t]),
        repeats=tuple(repeats[w] for w in lexemes),
        # A phrase has several positions, if only one lexeme's ("kax kax", foo_foo).
        phrases=any(len(p.words) > 1 for c in clauses for p in c),
        frequencies={w: frequencies.get(w, {}) for w in lexemes},
        sizes=sizes,
        spelled=tuple(spelled[w] for w in lexemes),
    )


def _phrase(sequence: tuple[tuple[int, str], ...], correction: str | None = None) -> Phrase:
    """A term's lexemes at their positions as a Phrase, its first at 0."""
    first = sequence[0][0]
    return Phrase(tuple((p - first, w) for p, w in sequence), correction)


def either(tsqueries: Iterable[str]) -> str:
    """tsquery texts (as Postgres printed them) joined by OR, empty and repeated ones skipped
    (a paragraph repeats its words, and Postgres would match and rank each copy); empty when
    there are none."""
    return " | ".join(f"( {q} )" for q in dict.fromkeys(tsqueries) if q)


def tsquery_literal(lexeme: str) -> str:
    """The tsquery that matches exactly this lexeme (quoted, so no character is an operator)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
