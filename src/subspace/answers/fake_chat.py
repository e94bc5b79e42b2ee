"""FakeChat: a deterministic, extractive stand-in for a chat model, offline.

It answers by quoting the sentences of the quoted sources that answer the question, each with
the ref it came from (answers/extractive.py says which: near the question's words, adding to
them, the kind of answer asked for first), and says NOTHING_FOUND when none does. Each line it
reads keeps what surrounds it: the page's title and the bullets above it (from a search hit's
breadcrumb, a read page's indentation, a quoted passage's title). Given tools, it makes a
fixed, sensible sequence of calls: kb.search with the question, then kb.read (or kb.node.read)
of the hit most likely to lead to the answer, then it answers. Asked to choose pages
(rag-pageindex), it picks the pages whose title and outline share the most words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

from subspace.answers import prompts
from subspace.answers.evidence import ref_regex
from subspace.answers.extractive import Sentence, answering, content_words, leading
from subspace.providers.chat import Message, ToolCall, ToolDef

MAX_BULLETS = 3
MAX_PAGES = 3
MAX_READS = 3  # of the hits an agent's search led to, before it answers
CRUMB = " › "  # between the parts of a breadcrumb, as kb.search prints it
# A sentence ends at a stop after a word or a closing bracket or quote (or before one), before
# a word that is not lower case: "The ? operator returns early" and "e.g. a file" are one
# sentence each.
_SENTENCE_END = re.compile(
    r"(?:(?<=[\w)\]\"”’'][.!?])|(?<=\w[.!?][\"”’')\]]))\s+(?![a-z])"
)  # "(… installed). After installing" ends one sentence too
_QUOTED = re.compile(
    re.escape(prompts.QUOTE_OPEN)
    + r' source="([^"]*)" title="([^"]*)">>>\n(.*?)\n'
    + re.escape(prompts.QUOTE_END),
    re.DOTALL,
)
_SEARCH_LINE = re.compile(r"^\d+\. \[\w+\] (.*?) — ")  # "1. [node] Page › crumb — "
_OUTLINE_LINE = re.compile(r"^( *)- ")  # a bullet of a read page, two spaces a level


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
        return _say(_extract(question, _quoted_lines(messages)), on_text)


def _question(messages: Sequence[Message]) -> str:
    for message in messages:
        if message.role == "user" and message.content.startswith(prompts.QUESTION_PREFIX):
            return message.content[len(prompts.QUESTION_PREFIX) :].split("\n", 1)[0]
    return next((m.content for m in messages if m.role == "user"), "")


def _next_call(question: str, messages: Sequence[Message], offered: set[str]) -> ToolCall | None:
    """kb.search first; after it, reads of its first hit and of the hits that lead to the
    answer, best first, then of the others in the search's order, up to MAX_READS (a passage
    is a window: the answer is often a sentence or a chunk away); then None (time to
    answer)."""
    calls = [call for m in messages for call in m.tool_calls]
    number = len(calls) + 1
    if not calls:
        if "kb.search" not in offered:
            return None
        return ToolCall(f"call_{number}", "kb.search", {"query": question})
    if calls[0].name != "kb.search" or len(calls) > MAX_READS:
        return None
    results = [m.content for m in messages if m.tool_call_id == calls[0].id]
    read = {str(call.arguments.get("ref")) for call in calls[1:]}
    found = _lines("", "", results[-1] if results else "")
    leads = leading(question, _sentences(found))
    # The search's first hit is read first (it ranked it by words and meaning both), then the
    # hits whose passages lead, then the rest. A file is read whole (within the answer's
    # budget): a hit shows its best chunk, and the answer is often a chunk away ("To create a
    # new thread, we call thread::spawn").
    for ref in dict.fromkeys(_whole_file(hit.ref) for hit in [*found[:1], *leads, *found]):
        if ref in read:
            continue
        if ref.startswith("node:") and "kb.node.read" in offered:
            return ToolCall(f"call_{number}", "kb.node.read", {"ref": ref})
        if "kb.read" in offered:
            return ToolCall(f"call_{number}", "kb.read", {"ref": ref})
        return None
    return None


def _whole_file(ref: str) -> str:
    """The ref of the whole file a chunk's ref names (file:<id>:<n> -> file:<id>); others as
    they are."""
    kind, _, rest = ref.partition(":")
    return f"file:{rest.split(':')[0]}" if kind == "file" else ref


def _quoted_lines(messages: Sequence[Message]) -> list[Sentence]:
    """Every line quoted to the model, with its ref and what surrounds it."""
    lines: list[Sentence] = []
    for message in messages:
        if message.role in ("user", "tool"):
            for match in _QUOTED.finditer(message.content):
                lines.extend(_lines(match.group(1), match.group(2), match.group(3)))
    return lines


@lru_cache(maxsize=8)
def _line_refs(ref: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A ref (`ref`, a regex) closing a line in parentheses, and one opening a kb.grep line
    (its ref, then the item's title in parentheses)."""
    return re.compile(rf"\s*\(({ref})\)\s*$"), re.compile(rf"^({ref}) \((.*?)\) ×\d+: ")


def _lines(source: str, title: str, text: str) -> list[Sentence]:
    """A quoted block's lines, each with the ref printed on it (or the block's, when the block
    quotes one item) and its context: a search hit's breadcrumb, a grep match's title, or the
    block's heading (or title) and the bullets the line is indented under."""
    lines = []
    trailing, leading_ref = _line_refs(ref_regex().pattern)
    own = source if ref_regex().fullmatch(source) else ""
    # A block quoting one item is titled by its place; one holding a tool's output, by the tool.
    root: tuple[str, ...] = tuple(title.split(CRUMB)) if own and title else ()
    above: list[tuple[int, str]] = []  # (depth, text) of the bullets over the next line
    if own.startswith(("file:", "mail:")):
        text = _paragraphs(text)
    for line in text.splitlines():
        ref, context = own, root
        if (found := trailing.search(line)) is not None:
            ref, line = found.group(1), line[: found.start()]
        if line.startswith("# "):  # a read item's heading: the title of what follows
            root, above = (line[2:].strip(),), []
            continue
        if (found := leading_ref.match(line)) is not None:
            ref, context, line = found.group(1), (found.group(2),), line[found.end() :]
        elif (found := _SEARCH_LINE.match(line)) is not None:
            context, line = tuple(found.group(1).split(CRUMB)), line[found.end() :]
        else:
            bullet = _OUTLINE_LINE.match(line)
            depth = len(bullet.group(1)) // 2 + 1 if bullet else 0
            line = line[bullet.end() :] if bullet else line.strip()
            line = line.removesuffix(" [memory]")
            while above and above[-1][0] >= depth:
                above.pop()
            context = root + tuple(text for _, text in above)
            above.append((depth, line.strip()))
        if ref and line.strip():
            lines.append(Sentence(line.strip(), ref, context))
    return lines


def _paragraphs(text: str) -> str:
    """A file's or a mail's text with the lines of each paragraph joined: a PDF or a mail wraps
    its lines ("the application", "MUST run the update-mime-database command"), and a blank line
    ends a paragraph; the heading of a read item stays a line of its own.

    >>> _paragraphs("# Spec\\nthe application\\nMUST run it.\\n\\nNext one.")
    '# Spec\\nthe application MUST run it.\\nNext one.'
    """
    paragraphs: list[str] = []
    wrapped: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip() and not line.startswith("# "):
            wrapped.append(line.strip())
            continue
        if wrapped:
            paragraphs.append(" ".join(wrapped))
            wrapped = []
        if line.strip():
            paragraphs.append(line)
    return "\n".join(paragraphs)


def _sentences(lines: list[Sentence]) -> list[Sentence]:
    """Each line cut into its sentences, each keeping the line's ref and context; a line that
    introduces the next with a colon is read with it ("Publish the package in the current
    directory:" and the command under it, "npm publish")."""
    joined: list[Sentence] = []
    for line in lines:
        last = joined[-1] if joined else None
        if last is not None and last.ref == line.ref and last.text.endswith(":"):
            joined[-1] = Sentence(f"{last.text} {line.text}", line.ref, last.context)
        else:
            joined.append(line)
    return [
        Sentence(" ".join(part.split()), line.ref, line.context)
        for line in joined
        for part in _SENTENCE_END.split(line.text)
        if part.strip()
    ]


def _extract(question: str, lines: list[Sentence]) -> str:
    """Up to MAX_BULLETS sentences that answer the question, each citing its ref."""
    best = answering(question, _sentences(lines), MAX_BULLETS)
    if not best:
        return prompts.NOTHING_FOUND
    return "\n".join(f"- {sentence.text} [{sentence.ref}]" for sentence in best)


def _choose_pages(question: str, messages: Sequence[Message]) -> str:
    """The refs of the pages, files and mail whose title and outline share the most words with
    the question."""
    wanted = content_words(question)
    scores: list[tuple[int, int, str]] = []
    for message in messages:
        if message.role != "user":
            continue
        for match in _QUOTED.finditer(message.content):
            if match.group(1).split(":")[0] in ("page", "file", "mail"):
                outline = f"{match.group(2)}\n{match.group(3)}"
                shared = len(wanted & content_words(outline))
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
