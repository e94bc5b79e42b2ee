"""FakeChat: a deterministic, extractive stand-in for a chat model, offline.

It answers by quoting the sentences of the quoted sources that share the most words with the
question, each with the ref it came from, and says NOTHING_FOUND when no sentence shares at
least half of the question's content words (one shared word is a neighbour, not an answer).
Given tools, it makes a fixed, sensible sequence of calls: kb.search with the question, then
kb.read (or kb.node.read) on the best hit, then it answers. Asked to choose pages
(rag-pageindex), it picks the pages whose title and outline share the most words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from subspace.answers import prompts
from subspace.answers.chat import Message, ToolCall, ToolDef
from subspace.answers.evidence import ref_regex

MAX_BULLETS = 3
MAX_PAGES = 3
STEM_CHARS = 5  # a crude stem: enough for plurals and -ing forms of most English words
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_QUOTED = re.compile(
    re.escape(prompts.QUOTE_OPEN)
    + r' source="([^"]*)" title="[^"]*">>>\n(.*?)\n'
    + re.escape(prompts.QUOTE_END),
    re.DOTALL,
)
_SEARCH_LINE = re.compile(r"^\d+\. \[\w+\] .*? — ")  # "1. [node] Page › crumb — "
_STOPWORDS = frozenset(
    "a an and are as at be by can could did do does for from had has have how i in is it its "
    "me my of on or our should that the their there these this to was we were what when where "
    "which who whom why will with would you your about any into than then them they not no "
    "there".split()
)


def content_words(text: str) -> set[str]:
    """The lower-cased words of `text` that carry meaning (no stopwords, no single letters),
    each cut to STEM_CHARS so that "leave" meets "leaves".

    >>> sorted(content_words("When does the tram leave?"))
    ['leave', 'tram']
    """
    return {
        w[:STEM_CHARS] for w in (m.group(0).lower() for m in _WORD.finditer(text))
        if len(w) > 1 and w not in _STOPWORDS
    }  # fmt: skip


def enough(shared: int, wanted: int) -> bool:
    """Whether a sentence sharing `shared` of the question's `wanted` content words answers
    it: at least half of them. One shared word ("tram") is a neighbour, not an answer."""
    return shared > 0 and 2 * shared >= wanted


@dataclass(frozen=True)
class Passage:
    ref: str
    text: str


class FakeChat:
    name = "fake"
    model = "fake-extractive"

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDef] = (),
        on_text: Callable[[str], None] | None = None,
    ) -> Message:
        question = _question(messages)
        if messages and messages[0].content == prompts.CHOOSE_SYSTEM:
            return _say(_choose_pages(question, messages), on_text)
        if tools:
            call = _next_call(question, messages, {t.name for t in tools})
            if call is not None:
                return Message("assistant", "", tool_calls=(call,))
        return _say(_extract(question, _passages(messages)), on_text)


def _question(messages: Sequence[Message]) -> str:
    for message in messages:
        if message.role == "user" and message.content.startswith(prompts.QUESTION_PREFIX):
            return message.content[len(prompts.QUESTION_PREFIX) :].split("\n", 1)[0]
    return next((m.content for m in messages if m.role == "user"), "")


def _next_call(question: str, messages: Sequence[Message], offered: set[str]) -> ToolCall | None:
    """kb.search first; after it, a read of the best hit; then None (time to answer)."""
    calls = [call for m in messages for call in m.tool_calls]
    number = len(calls) + 1
    if not calls:
        if "kb.search" not in offered:
            return None
        return ToolCall(f"call_{number}", "kb.search", {"query": question})
    if len(calls) > 1 or calls[-1].name != "kb.search":
        return None
    results = [m.content for m in messages if m.tool_call_id == calls[-1].id]
    best = _best(question, _passages_of("", results[-1] if results else ""))
    if best is None:
        return None
    if best.ref.startswith("node:") and "kb.node.read" in offered:
        return ToolCall(f"call_{number}", "kb.node.read", {"ref": best.ref})
    if "kb.read" in offered:
        return ToolCall(f"call_{number}", "kb.read", {"ref": best.ref})
    return None


def _passages(messages: Sequence[Message]) -> list[Passage]:
    passages: list[Passage] = []
    for message in messages:
        if message.role in ("user", "tool"):
            for match in _QUOTED.finditer(message.content):
                passages.extend(_passages_of(match.group(1), match.group(2)))
    return passages


@lru_cache(maxsize=8)
def _line_refs(ref: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A ref (`ref`, a regex) closing a line in parentheses, and one opening a kb.grep line."""
    return re.compile(rf"\s*\(({ref})\)\s*$"), re.compile(rf"^({ref}) \(.*?\) ×\d+: ")


def _passages_of(source: str, text: str) -> list[Passage]:
    """A quoted block's lines as passages, each with the ref printed on it (or the block's)."""
    passages = []
    trailing, leading = _line_refs(ref_regex().pattern)
    for line in text.splitlines():
        ref = source if ref_regex().fullmatch(source) else ""
        if line.startswith("# "):
            continue  # a heading: the title, already part of the source
        if (found := trailing.search(line)) is not None:
            ref, line = found.group(1), line[: found.start()]
        elif (found := leading.match(line)) is not None:
            ref, line = found.group(1), line[found.end() :]
        line = _SEARCH_LINE.sub("", line.strip()).removeprefix("- ").removesuffix(" [memory]")
        if ref and line.strip():
            passages.append(Passage(ref, line.strip()))
    return passages


def _best(question: str, passages: list[Passage]) -> Passage | None:
    wanted = content_words(question)
    scored = [(len(wanted & content_words(p.text)), -i, p) for i, p in enumerate(passages)]
    scored = [s for s in scored if s[0] > 0]
    return max(scored, key=lambda s: (s[0], s[1]))[2] if scored else None


def _extract(question: str, passages: list[Passage]) -> str:
    """Up to MAX_BULLETS sentences sharing the most content words with the question."""
    wanted = content_words(question)
    candidates: list[tuple[int, int, str, str]] = []
    seen: set[str] = set()
    for passage in passages:
        for sentence in _SENTENCE_END.split(passage.text):
            sentence = " ".join(sentence.split())
            key = sentence.lower()
            shared = len(wanted & content_words(sentence))
            if enough(shared, len(wanted)) and key not in seen:
                seen.add(key)
                candidates.append((shared, -len(candidates), sentence, passage.ref))
    if not candidates:
        return prompts.NOTHING_FOUND
    best = sorted(candidates, reverse=True)[:MAX_BULLETS]
    return "\n".join(f"- {sentence} [{ref}]" for _, _, sentence, ref in best)


def _choose_pages(question: str, messages: Sequence[Message]) -> str:
    """The refs of the pages whose title and outline share the most words with the question."""
    wanted = content_words(question)
    scores: list[tuple[int, int, str]] = []
    for message in messages:
        if message.role != "user":
            continue
        for match in _QUOTED.finditer(message.content):
            if match.group(1).startswith("page:"):
                shared = len(wanted & content_words(match.group(2)))
                if shared:
                    scores.append((shared, -len(scores), match.group(1)))
    if not scores:
        return prompts.NOTHING_FOUND
    return "\n".join(ref for _, _, ref in sorted(scores, reverse=True)[:MAX_PAGES])


def _say(text: str, on_text: Callable[[str], None] | None) -> Message:
    """Stream `text` a few words at a time, as a model would, and return it whole."""
    if on_text is not None:
        for piece in re.findall(r"\S+\s*", text):
            on_text(piece)
    return Message("assistant", text)
