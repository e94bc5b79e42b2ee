"""What a run retrieved (the refs it may cite), its context budget, and the answer parser.

An answer is checked line by line as it streams: a bullet keeps only refs the run retrieved,
a bullet left with no ref is dropped, and what remains is plain text (no images, no links to
other hosts, no HTML), since answers are stored as bullets and shown as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

from subspace.answers.prompts import NOTHING_FOUND
from subspace.answers.strategy import AnswerBullet
from subspace.search.refs import ref_parts, ref_words

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


@dataclass(frozen=True)
class RefPatterns:
    """The regexes that find refs in text, for the kinds registered (search/registry.py)."""

    ref: re.Pattern[str]  # one ref: page:<uuid>, mem:<uuid>, file:<uuid>:3 (any case)
    citation: re.Pattern[str]  # refs in square brackets, separated by commas or semicolons
    closing: re.Pattern[str]  # a ref in parentheses closing a line (search hits, outlines)
    opening: re.Pattern[str]  # a ref opening a line before " (" (grep matches)


@lru_cache(maxsize=8)
def _compiled(words: tuple[str, ...], parts: int) -> RefPatterns:
    more = "(?::\\d+)?" if parts == 1 else f"(?::\\d+){{0,{parts}}}"
    ref = rf"\b(?:{'|'.join(map(re.escape, words))}):{_UUID}{more}\b"
    return RefPatterns(
        re.compile(ref, re.IGNORECASE),
        re.compile(rf"\[\s*((?:{ref})(?:\s*[,;]?\s*(?:{ref}))*)\s*\]", re.IGNORECASE),
        re.compile(rf"\(({ref})\)$"),
        re.compile(rf"^({ref})(?= \()"),
    )


def ref_patterns() -> RefPatterns:
    """The ref regexes for the kinds registered now: their prefixes and row types
    (refs.ref_words), a UUID, and as many numeric parts as the longest ref has."""
    return _compiled(ref_words(), ref_parts())


def ref_regex() -> re.Pattern[str]:
    """A ref of any registered kind, as the tools print it: `node:<uuid>`, `file:<uuid>:3`."""
    return ref_patterns().ref


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]*)[^)]*\)")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^>\s]*)>", re.IGNORECASE)
# A tag of HTML (or a comment, a doctype) in a model's line is markup, dropped; anything else
# in angle brackets is text a document holds: `npm publish --workspace=<workspace-name>`.
_HTML_ELEMENTS = (
    "a|abbr|b|big|blockquote|body|br|button|center|code|dd|del|details|div|dl|dt|em|embed|font|"
    "form|h[1-6]|head|hr|html|i|iframe|img|input|ins|kbd|li|link|meta|object|ol|p|picture|pre|s|"
    "samp|script|section|small|source|span|strike|strong|style|sub|summary|sup|svg|table|tbody|"
    "td|th|thead|title|tr|tt|u|ul|var|video|wbr"
)
_TAG = re.compile(rf"<!--.*?-->|<![A-Za-z][^>]*>|</?(?:{_HTML_ELEMENTS})(?:\s[^>]*)?/?>",
                  re.IGNORECASE | re.DOTALL)  # fmt: skip
_BULLET_MARK = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
MAX_BULLET_CHARS = 2_000  # a claim, not an essay: longer lines are cut


@dataclass
class Evidence:
    """The refs a run retrieved, with a title for each, and what is left of its budget of
    quoted characters (SUBSPACE_RAG_MAX_CONTEXT_CHARS)."""

    budget: int
    titles: dict[str, str] = field(default_factory=dict)  # ref -> title, in retrieval order

    def take(self, text: str) -> str:
        """The part of `text` the budget still allows (all of it, a cut prefix, or "");
        the budget shrinks by what is returned."""
        if self.budget <= 0:
            return ""
        if len(text) > self.budget:
            cut = text[: self.budget]
            # Cut at a line end when one is near, so no ref is cut in half.
            line_end = cut.rfind("\n")
            text = cut[:line_end] if line_end > len(cut) // 2 else cut
        self.budget -= len(text)
        return text

    def add(self, ref: str, title: str = "") -> None:
        ref = ref.lower()
        if ref not in self.titles or not self.titles[ref]:
            self.titles[ref] = title

    def add_text(self, text: str) -> None:
        """The refs a tool's result printed become citable: the one closing a line in
        parentheses (search hits, outline bullets, headings) or opening it (grep matches).
        Refs inside stored text were not retrieved and stay uncitable; a line's text up to
        its ref serves as the ref's title for "Closest" bullets."""
        patterns = ref_patterns()
        for line in text.splitlines():
            line = line.rstrip()
            closing = patterns.closing.search(line)
            if closing is not None:
                self.add(closing.group(1), _title_of(line, closing.start()))
                continue
            opening = patterns.opening.match(line)
            if opening is not None:
                title = re.match(r"\s*\((.*)\) ×", line[opening.end() :])
                self.add(opening.group(1), title.group(1) if title else "")

    def has(self, ref: str) -> bool:
        return ref.lower() in self.titles

    def closest(self, count: int = 3) -> list[tuple[str, str]]:
        """The first `count` refs retrieved, with their titles."""
        return list(self.titles.items())[:count]


def printed_ref(line: str) -> str | None:
    """The ref a tool printed for the item on `line` (see Evidence.add_text), lower case."""
    line = line.rstrip()
    patterns = ref_patterns()
    found = patterns.closing.search(line) or patterns.opening.match(line)
    return found.group(1).lower() if found is not None else None


def _title_of(line: str, ref_start: int) -> str:
    head = line[:ref_start].strip()
    head = re.sub(r"^#+\s*|^\d+\.\s*\[\w+\]\s*|^[-*]\s*", "", head.strip())
    head = " ".join(head.split())
    return head if len(head) <= 120 else head[:119] + "…"


_CITED = "\x00"  # where a citation stood, while a line is cleaned


def parse_line(line: str, evidence: Evidence) -> AnswerBullet | None:
    """The answer bullet one line of a model's answer holds, or None: not a claim, or no ref
    the run retrieved is left on it.

    >>> parse_line("- The dam opens at six [node:…]", evidence).text
    'The dam opens at six'
    """
    patterns = ref_patterns()
    refs: list[str] = []

    def keep(match: re.Match[str]) -> str:
        for ref in patterns.ref.findall(match.group(1)):
            ref = ref.lower()
            if evidence.has(ref) and ref not in refs:
                refs.append(ref)
        return _CITED

    text = patterns.citation.sub(keep, line)
    # A stop after a citation closes the sentence: "six [node:…]." is "six." But a mark the
    # sentence holds keeps its space: "the ? operator".
    text = re.sub(rf"\s*{_CITED}\s*(?=[.,;:!?])", "", text).replace(_CITED, " ")
    text = " ".join(plain_text(text).split())
    text = _BULLET_MARK.sub("", text).strip()
    if not refs or not text or text == NOTHING_FOUND:
        return None
    if len(text) > MAX_BULLET_CHARS:
        text = text[: MAX_BULLET_CHARS - 1] + "…"
    return AnswerBullet(text, refs)


def parse_answer(text: str, evidence: Evidence) -> list[AnswerBullet]:
    """Every answer bullet of a whole answer, refs checked (see parse_line)."""
    bullets = (parse_line(line, evidence) for line in text.splitlines())
    return [bullet for bullet in bullets if bullet is not None]


def plain_text(text: str) -> str:
    """`text` as plain text: an image becomes its alt text, a link to another host
    "label (host)", a link to this site its label, and HTML tags are removed (other words in
    angle brackets stay).

    >>> plain_text("see ![map](http://x.example/m.png) and [docs](https://evil.example/a)")
    'see map and docs (evil.example)'
    >>> plain_text("<b>run</b> npm publish --workspace=<workspace-name>")
    'run npm publish --workspace=<workspace-name>'
    """
    text = _IMAGE.sub(lambda m: m.group(1), text)
    text = _LINK.sub(_link_text, text)
    text = _AUTOLINK.sub(lambda m: m.group(1), text)
    return _TAG.sub("", text)


def _link_text(match: re.Match[str]) -> str:
    label, target = match.group(1), match.group(2)
    host = urlsplit(target).hostname if "//" in target else None
    return f"{label} ({host})" if host else label


class LineReader:
    """Splits a streamed answer into lines and hands each answer bullet to `emit` as soon as
    its line is complete; `finish()` flushes the last line. `said_nothing_found` tells whether
    the model answered NOTHING_FOUND."""

    def __init__(self, evidence: Evidence, emit: Callable[[AnswerBullet], None]) -> None:
        self.evidence = evidence
        self.emit = emit
        self.bullets: list[AnswerBullet] = []
        self.said_nothing_found = False
        self._pending = ""

    def feed(self, delta: str) -> None:
        self._pending += delta
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self._line(line)

    def finish(self) -> None:
        line, self._pending = self._pending, ""
        if line.strip():
            self._line(line)

    def _line(self, line: str) -> None:
        if line.strip() == NOTHING_FOUND:
            self.said_nothing_found = True
            return
        bullet = parse_line(line, self.evidence)
        if bullet is not None and bullet not in self.bullets:
            self.bullets.append(bullet)
            self.emit(bullet)
