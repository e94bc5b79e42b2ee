"""The extractive rule: which quoted sentences answer a question, for a chat model that quotes.

A sentence answers when it adds to the question. It must be near the question's words (they
are in the sentence, or in its page's title and the bullets above it), hold at least half of
them there, and say something they do not: a sentence made only of the question's words
restates it, and one that asks or quotes a question (a tip suggesting it) is not its answer.
When the question asks for a duration ("how long…"), a time ("when…"), a number ("how
many…"), a cause ("what caused…", "why…") or a way to do something ("how do I…", "how to…":
a sentence that says what to run, use or call), the sentences that give one come first and the
others are left out, if any gives one; for a how-question an instruction ("Run the cargo
publish command") comes before the other ways of saying what to do. Among the rest, a sentence
holding the question's rarer words comes first: a word weighs by how few of the sentences read
hold it, and half as much around a sentence as in it. An answer is prose: a heading, a file name
or a list of links is not quoted as one, nor a file's sentence cut at a chunk's edge.

>>> [s.text for s in answering("How long was checkout down?", [
...     Sentence("How long was checkout down?", "node:1"),
...     Sentence("Checkout was down.", "node:2"),
...     Sentence("Checkout was down for 14 minutes.", "node:3")])]
['Checkout was down for 14 minutes.']
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

STEM_CHARS = 5  # a crude stem: enough for plurals and -ing forms of most English words
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be by can could did do does for from had has have how i in is it its "
    "me my of on or our should that the their there these this to was we were what when where "
    "which who whom why will with would you your about any into than then them they not no "
    "there".split()
)

AnswerKind = Literal["duration", "time", "number", "cause", "method"]

# What a question asks for, read from its first words: a question is asked at its start, and
# a statement (a claim to check) that says "when" or "causes" further on asks for nothing.
_ASKS: tuple[tuple[re.Pattern[str], AnswerKind], ...] = (
    (re.compile(r"(?:for )?how long\b"), "duration"),
    (re.compile(r"how (?:many|much)\b"), "number"),
    (re.compile(r"(?:when|(?:at |on |by )?(?:what|which) (?:time|day|date|year))\b"), "time"),
    (
        re.compile(
            r"(?:why|what (?:caused|causes|led to|leads to)|"
            r"what (?:is|was|were|are) the (?:root )?(?:causes?|reasons?))\b"
        ),
        "cause",
    ),
    (
        re.compile(
            r"how (?:do|can|could|should|would|shall|may) (?:i|you|we|one)\b|how to\b|"
            r"what (?:do|should|must|can) (?:i|you|we) (?:run|type|use|call)\b"
        ),
        "method",
    ),
)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    "forty|fifty|sixty|ninety|hundred"
)
_NUMBER = rf"(?:\d+(?:[.,]\d+)?|{_NUMBER_WORDS})"
_AMOUNT = rf"(?:{_NUMBER}|a few|several|half an?|an?)"  # of a duration: "an hour", "a week"
# A sentence that starts by saying what to do: "Run the cargo publish command again."
_IMPERATIVE = (
    r"(?:run|use|call|add|put|install|set|type|enter|create|open|edit|pass|execute|change|make|"
    r"copy|move|download|select|click|write|specify|configure|start|restart|remove|delete|"
    r"update|build|publish|import|define|declare|replace|invoke|launch|append|insert|choose|"
    r"include|visit|upload|register)\b"
)
_GIVES: dict[AnswerKind, re.Pattern[str]] = {
    "duration": re.compile(
        rf"\b{_AMOUNT}[\s-]+(?:seconds?|minutes?|hours?|days?|weeks?|months?|years?)\b"
        r"|\b\d+(?:[.,]\d+)?\s?(?:ms|s|min|h)\b",
        re.IGNORECASE,
    ),
    "time": re.compile(
        r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|\b(?:january|february|march|april|"
        r"may|june|july|august|september|october|november|december)\b|\b\d{1,2}:\d{2}\b|"
        r"\b\d{1,2}\s?(?:am|pm)\b|\b(?:noon|midnight|morning|afternoon|evening|tonight|today|"
        r"tomorrow|yesterday|weekend|spring|summer|autumn|winter)\b|\b(?:19|20)\d{2}\b|"
        r"\bat (?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b",
        re.IGNORECASE,
    ),
    "number": re.compile(rf"\b{_NUMBER}\b", re.IGNORECASE),
    "cause": re.compile(
        r"\b(?:because|caused|causes|cause|due to|owing to|led to|leads to|results? in|"
        r"resulted in|result of|reasons?)\b",
        re.IGNORECASE,
    ),
    # An instruction ("Run the cargo publish command"), a purpose and its means ("To create a
    # thread, we call thread::spawn"), a case and what to do in it ("If you're using Linux,
    # open a terminal and enter…"), or a sentence saying what one must do ("you can" says what
    # is possible, too often not how).
    "method": re.compile(
        r"^(?:to \w+\b[^,.]*,|if [^,.]+, (?:then )?(?:open|run|use|call|enter|type|install|add|"
        r"set|create|put|pass)\b|" + _IMPERATIVE + ")"
        r"|\byou (?:need to|must|have to)\b"
        r"|\b(?:must|should|needs? to|has to|have to) (?:run|use|call|type|execute)\b"
        # the function that does it: "The path.extname() method returns the extension"
        r"|\b\w+(?:\.\w+)+\(\)"
        r"|\bby (?:running|using|calling|typing|adding|setting|passing)\b"
        r"|\bwe (?:call|use|run|add|pass)\b",
        re.IGNORECASE,
    ),
}
# A bullet above a sentence that names what it lists: the bullets under "Root cause" are causes.
_NAMES: dict[AnswerKind, re.Pattern[str]] = {
    "cause": re.compile(r"\b(?:causes?|reasons?|why)\b", re.IGNORECASE),
    "duration": re.compile(r"\b(?:duration|downtime|how long)\b", re.IGNORECASE),
    "time": re.compile(r"\b(?:when|dates?|times?)\b", re.IGNORECASE),
}
_QUOTATION = re.compile(r"\"[^\"]*\"|“[^”]*”")


def content_words(text: str) -> set[str]:
    """The lower-cased words of `text` that carry meaning (no stopwords, no single letters),
    each cut to STEM_CHARS so that "leave" meets "leaves".

    >>> sorted(content_words("When does the tram leave?"))
    ['leave', 'tram']
    """
    words = {
        w[:STEM_CHARS] for w in (m.group(0).lower() for m in _WORD.finditer(text))
        if len(w) > 1 and w not in _STOPWORDS
    }  # fmt: skip
    # An operator standing alone is a word of its own: "the ? operator", "=>", "::".
    return words | {token for token in text.split() if _SYMBOL.fullmatch(token)}


_SYMBOL = re.compile(r"[^\w\s\"“”'‘’(),.;:!…\-–—•|·]{1,3}|::|\?\?|\?")


# Words that only say what kind of answer is wanted: "Root cause" names causes, gives none.
_KIND_WORDS: dict[AnswerKind, frozenset[str]] = {
    "duration": frozenset(content_words("long duration downtime time")),
    "time": frozenset(content_words("time day date year")),
    "number": frozenset(content_words("many much number count")),
    "cause": frozenset(content_words("cause causes caused reason reasons root because why")),
    "method": frozenset(),
}
# Words that only ask, in a question of that kind: "how do I get the file extension" is after
# the extension, not after getting.
_ASKING_WORDS: dict[AnswerKind, set[str]] = {"method": content_words("get make use find have")}
_LIST_SEPARATOR = re.compile(r"\s[-•|·]\s")
MIN_ANSWER_WORDS = 3  # fewer is a heading, a name or a label, not a sentence that answers


ELISION = "…"  # where a search passage leaves words out: what holds it is cut, not quoted


# A sentence ending with a stop, or a statement of a label and its value ("Recipient address:
# jangel1@…", "Publish the package in the current directory: npm publish").
_WHOLE_SENTENCE = re.compile(r"^[^a-z](?:.*[.!?][\"”’')\]]?|[^:]*\w: \S.*)$", re.DOTALL)


def is_whole(sentence: Sentence) -> bool:
    """Whether the sentence is whole. A bullet is, as written; a file's or a mail's text is
    prose, whose sentences start with a capital (or a mark, a digit) and end with a stop, or
    state a label's value: a line without one is a heading or a caption, and a chunk's edge cuts
    a sentence ("If the install", "operator won't convert…").

    >>> is_whole(Sentence("If the install", "file:1:2")), is_whole(Sentence("Kept", "node:1"))
    (False, True)
    """
    if not sentence.ref.startswith(("file:", "mail:")):
        return True
    return bool(_WHOLE_SENTENCE.match(sentence.text))


def is_prose(text: str) -> bool:
    """Whether `text` reads as a whole sentence: MIN_ANSWER_WORDS words or more, not a run of
    list items ("See Also - package spec - npm registry - npm scope"), not a search passage's
    cut ("returns … Option"), which reading the item gives whole.

    >>> is_prose("ch14-03-cargo-workspaces.html"), is_prose("Run cargo publish.")
    (False, True)
    """
    if ELISION in text:
        return False
    words = [w for w in text.split() if _WORD.search(w)]
    return len(words) >= MIN_ANSWER_WORDS and len(_LIST_SEPARATOR.findall(text)) < 2


def enough(shared: int, wanted: int) -> bool:
    """Whether `shared` of the question's `wanted` content words are enough to answer it: at
    least half of them. One shared word ("tram") is a neighbour, not an answer."""
    return shared > 0 and 2 * shared >= wanted


@dataclass(frozen=True)
class Question:
    words: frozenset[str]  # its content words, less those that say what kind of answer it wants
    wants: AnswerKind | None


def read_question(text: str) -> Question:
    """The question's content words and the kind of answer it asks for, if it names one.

    >>> question = read_question("How long was checkout down?")
    >>> sorted(question.words), question.wants
    (['check', 'down'], 'duration')
    """
    lowered = " ".join(text.lower().split()).rstrip(" ?!.")  # its own stop is not a word
    for pattern, kind in _ASKS:
        asked = pattern.match(lowered)
        if asked is not None:
            words = content_words(lowered) - content_words(asked.group(0))
            return Question(frozenset(words - _ASKING_WORDS.get(kind, set())), kind)
    return Question(frozenset(content_words(lowered)), None)


@dataclass(frozen=True)
class Sentence:
    text: str
    ref: str
    context: tuple[str, ...] = ()  # its page's title, then the bullets above it, nearest last


@dataclass(frozen=True, order=True)
class _Fit:
    """How well a sentence answers, best first when sorted in reverse (see _fit)."""

    gives: int  # it gives the kind of answer asked for: 2 by an instruction, 1 otherwise
    rare: float  # the question words in it (around it, half), each by how few sentences hold it
    covered: int  # question words in the sentence or around it
    around: int  # question words in its title and the bullets above it
    shared: int  # question words in the sentence itself
    adds: bool  # it says something besides the question's words


def _fit(
    question: Question, sentence: Sentence, rarity: dict[str, float] | None = None
) -> _Fit | None:
    """How `sentence` fits `question`, or None when it cannot be the answer (or lead to it).
    `rarity` weighs each question word (1 each without it)."""
    if _quotes_question(question, sentence.text):
        return None
    own = content_words(sentence.text)
    around = question.words & content_words(" ".join(sentence.context))
    shared = question.words & own
    covered = shared | around
    gives = _giving(question.wants, sentence)
    if not (shared or gives) or not enough(len(covered), len(question.words)):
        return None
    kind_words = _KIND_WORDS[question.wants] if question.wants is not None else frozenset()
    adds = bool(own - question.words - kind_words)
    # Words around a sentence (its title, the bullets above) count half: every sentence of a
    # chapter has its title around it.
    weight = rarity or {}
    rare = sum(weight.get(w, 1.0) for w in shared) + sum(
        weight.get(w, 1.0) / 2 for w in around - shared
    )
    return _Fit(gives, round(rare, 6), len(covered), len(around), len(shared), adds)


def _giving(kind: AnswerKind | None, sentence: Sentence) -> int:
    """How the sentence gives what the question asks for: 2 for an instruction answering a
    how-question ("Run the cargo publish command"), 1 for another way of giving it, 0 for
    none. The instruction is the direct answer; "Before you can publish, you need to create
    an account" is a step before it."""
    if kind is None or not is_giving(kind, sentence):
        return 0
    instruction = kind == "method" and re.match(_IMPERATIVE, sentence.text, re.IGNORECASE)
    return 2 if instruction else 1


def is_giving(kind: AnswerKind, sentence: Sentence) -> bool:
    """Whether the sentence gives a `kind`: it says one, or sits under a bullet naming it."""
    if _GIVES[kind].search(sentence.text):
        return True
    names = _NAMES.get(kind)
    return names is not None and any(names.search(above) for above in sentence.context[1:])


def _quotes_question(question: Question, text: str) -> bool:
    """Whether the question's words in `text` are only inside quotation marks: a sentence that
    suggests searching or asking them ('subspace search "checkout outage"') quotes them; one
    that also says them ('npm is not an abbreviation for "Node Package Manager"') does not."""
    shared = question.words & content_words(text)
    said = content_words(_QUOTATION.sub(" ", text))
    return bool(shared) and not shared & said


def _rarity(question: Question, sentences: list[Sentence]) -> dict[str, float]:
    """Each question word's weight among `sentences`: log(1 + n / sentences holding it), so a
    word few of them hold ("extension" in a chapter on paths) counts for more than one most of
    them hold ("path")."""
    holding = Counter(w for s in sentences for w in question.words & content_words(s.text))
    return {w: math.log(1 + len(sentences) / (holding[w] + 1)) for w in question.words}


def asks(text: str) -> bool:
    """Whether `text` asks: it ends with its question mark ("The ? operator returns early"
    does not)."""
    return text.rstrip(" \"”’')").endswith("?")


def answers(fit: _Fit, sentence: Sentence) -> bool:
    """Whether a sentence that fits may be quoted as an answer: it adds to the question, reads
    as a whole sentence, and does not ask. (One that asks may still lead to the answer: the
    FAQ's "Is npm an acronym?" has it under it.)"""
    return fit.adds and is_prose(sentence.text) and is_whole(sentence) and not asks(sentence.text)


def _ranked(question: Question, sentences: Iterable[Sentence], *, adding: bool) -> list[Sentence]:
    """The sentences that fit `question` (and add to it, when `adding`), best first; those
    giving the kind of answer asked for only, when any does."""
    sentences = list(sentences)
    rarity = _rarity(question, sentences)
    fits = []
    for position, sentence in enumerate(sentences):
        fit = _fit(question, sentence, rarity)
        if fit is not None and (not adding or answers(fit, sentence)):
            fits.append((fit, -position, sentence))
    if any(fit.gives for fit, _, _ in fits):
        fits = [f for f in fits if f[0].gives]
    fits.sort(key=lambda f: (f[0], f[1]), reverse=True)
    return [sentence for _, _, sentence in fits]


def answering(question: str, sentences: Iterable[Sentence], count: int = 3) -> list[Sentence]:
    """The (at most `count`) sentences that answer `question`, best first; [] when none does.
    The same sentence quoted twice counts once, whether or not it kept its Markdown (a bullet
    read whole has it, its search passage does not)."""
    seen: set[str] = set()
    chosen: list[Sentence] = []
    for sentence in _ranked(read_question(question), sentences, adding=True):
        key = " ".join(sentence.text.replace("`", "").replace("**", "").lower().split())
        if key not in seen and len(chosen) < count:
            seen.add(key)
            chosen.append(sentence)
    return chosen


def leading(question: str, sentences: Iterable[Sentence]) -> list[Sentence]:
    """The sentences most likely to lead to the answer when read with what is around them,
    best first: as `answering` ranks them, but a bullet that only names the answer's kind
    ("Root cause") or asks the question its children answer counts."""
    return _ranked(read_question(question), sentences, adding=False)
