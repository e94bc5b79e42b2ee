"""Parsing a query as people type it: words, "quoted phrases", -negation and OR.

The parser never produces tsquery syntax. Each term becomes a `phraseto_tsquery` over its own
text, and terms are combined with tsquery operators in SQL, so no input can cause a syntax
error, and identifiers such as PROJ-1234 or user@example.com stay one searchable phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from subspace.text import clean_text

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
# An identifier mixes letters with digits or joins its parts with - _ . @ (CVE-2022-21658,
# E0382, asn1_der_decoding, PAY-4471, 0x80070005, user@example.com): rows holding it whole
# come before rows holding only its parts or only its meaning.
_IDENTIFIER = re.compile(r"^(?=[^\s]*[^\W\d_])(?:[^\W_]+(?:[-_.@][^\W_]+)+|(?=[^\s]*\d)[^\W_]+)$")
# A word joined by dashes alone is a compound of English ("birth-weight"), not an identifier.
_CODE_LIKE = re.compile(r"\d|\w[_.@]\w")
_QUESTION_WORDS = {
    "who", "what", "when", "where", "why", "how", "which", "whose", "whom", "can", "could",
    "does", "do", "did", "is", "are", "was", "were", "should", "would", "will", "has", "have",
    "explain", "summarize", "summarise", "list", "compare",
}  # fmt: skip
QUESTION_MIN_WORDS = 4  # "how do I rotate keys" reads as a question, "how-to" does not
LONG_QUERY_WORDS = 8  # a query this long reads as a question even without a question word
# A query of more words than this is pasted prose: its dashes are punctuation ("May 2002
# -July 2007"), not exclusions. On the long-query collection, reading them as exclusions left
# out the very abstract two queries were taken from (docs/benchmarks.md, "Long queries").
PROSE_WORDS = 16
# A query this long is a passage pasted to find what says the same (ArguAna's arguments, 46
# words and more); no question or claim of the measured collections reaches 30.
PASSAGE_WORDS = 40


@dataclass(frozen=True)
class Clause:
    """Alternatives joined by OR; each alternative is a word or a phrase."""

    alternatives: tuple[str, ...]


@dataclass(frozen=True)
class ParsedQuery:
    text: str
    clauses: tuple[Clause, ...] = ()
    negated: tuple[str, ...] = ()
    words: tuple[str, ...] = field(default=())
    # Phrases of several words typed in quotes: every row must hold each, its words in order.
    quoted: tuple[str, ...] = ()

    @property
    def identifiers(self) -> tuple[str, ...]:
        """The query's identifiers (not excluded): "E0382" of "E0382 borrow of moved value".

        >>> parse_query("E0382 borrow of moved value OR asn1_der_decoding -v2").identifiers
        ('E0382', 'asn1_der_decoding')
        >>> parse_query("Birth-weight is associated with PAY-4471").identifiers
        ('PAY-4471',)
        """
        return tuple(
            word for alt in self.alternatives
            if " " not in alt and _IDENTIFIER.match(word := alt.strip(".,;:!?()[]"))
            and _CODE_LIKE.search(word)
        )  # fmt: skip

    @property
    def is_empty(self) -> bool:
        return not self.clauses

    @property
    def alternatives(self) -> list[str]:
        """Every positive term and phrase, for any-word matching."""
        return [alt for clause in self.clauses for alt in clause.alternatives]

    @property
    def asks(self) -> bool:
        """True when the query is put as a question: it ends with "?", or starts with a
        question word ("how do you know if a residual plot is good")."""
        if not self.words:
            return False
        if self.text.rstrip().endswith("?") and len(self.words) >= 2:
            return True
        first = self.words[0].lower().strip("¿¡")
        return first in _QUESTION_WORDS and len(self.words) >= QUESTION_MIN_WORDS

    @property
    def is_passage(self) -> bool:
        """True when the query is a pasted passage, PASSAGE_WORDS words or more."""
        return len(self.words) >= PASSAGE_WORDS

    @property
    def is_question(self) -> bool:
        """True when the query reads like a question or prose rather than a lookup."""
        return self.asks or len(self.words) >= LONG_QUERY_WORDS


def parse_query(text: str) -> ParsedQuery:
    """Split the query into clauses (ANDed), each a set of OR-ed alternatives, and negations
    (none in prose: more than PROSE_WORDS words, where quotation marks are no phrase either).

    >>> q = parse_query('deploy "staging cluster" -prod kafka OR redis')
    >>> [c.alternatives for c in q.clauses], q.negated
    ([('deploy',), ('staging cluster',), ('kafka', 'redis')], ('prod',))
    >>> parse_query("adduser --system").negated
    ()
    """
    text = " ".join(clean_text(text).split())
    prose = len(text.split()) > PROSE_WORDS
    clauses: list[list[str]] = []
    negated: list[str] = []
    words: list[str] = []
    quoted: list[str] = []
    join_next = False
    for match in _TOKEN.finditer(text):
        minus, phrase, word = match.groups()
        if word is not None:
            if word == "OR":
                join_next = bool(clauses)
                continue
            # "-word" excludes; "-5" is a number and "--system" a command's option, words both.
            excluding = len(word) > 1 and not word[1].isdigit() and word[1] != "-"
            if word.startswith("-") and excluding and not prose:
                negated.append(word[1:])
                words.append(word[1:])
                join_next = False
                continue
            term = word
        else:
            term = phrase.strip()
            if not term:
                continue
            if prose:
                # Quotation marks in pasted prose quote someone; they are not a phrase to
                # require (ArguAna: 125 of 1,406 arguments quote a sentence).
                words.extend(term.split())
                clauses.extend([w] for w in term.split())
                join_next = False
                continue
            if minus and not prose:
                negated.append(term)
                words.extend(term.split())
                join_next = False
                continue
        words.extend(term.split())
        if join_next:
            clauses[-1].append(term)
        else:
            clauses.append([term])
            if phrase is not None and len(term.split()) > 1:
                quoted.append(term)
        join_next = False
    return ParsedQuery(
        text=text,
        clauses=tuple(Clause(tuple(c)) for c in clauses),
        negated=tuple(negated),
        words=tuple(words),
        # A quoted phrase OR-ed with another term limits nothing on its own.
        quoted=tuple(c[0] for c in clauses if len(c) == 1 and c[0] in quoted),
    )
