"""The extractive rule the fake (and local) chat provider answers by: the sentences that add to
the question answer it, never one that restates it; what surrounds a line (its page's title,
the bullets above it) counts as near; the kind of answer asked for comes first."""

from __future__ import annotations

from uuid import UUID, uuid5

import pytest

from subspace.answers import prompts
from subspace.answers.extractive import (
    Sentence,
    answering,
    is_giving,
    is_whole,
    leading,
    read_question,
)
from subspace.answers.fake_chat import FakeChat
from subspace.providers.chat import Message, ToolCall, ToolDef

_NS = UUID("8d6f7f0e-2b1a-4c3d-9e8f-0a1b2c3d4e5f")


def ref(name: str) -> str:
    """A stable node ref for a name, so a table can say which bullet it expects."""
    return f"node:{uuid5(_NS, name)}"


def ask(question: str, *quoted: str) -> list[str]:
    """FakeChat's answer to `question` from the quoted blocks, as its lines."""
    messages = [
        Message("system", prompts.ANSWER_SYSTEM),
        Message("user", prompts.question_message(question, list(quoted))),
    ]
    return FakeChat().complete(messages).content.splitlines()


def outline(title: str, *bullets: tuple[int, str, str]) -> str:
    """A page as kb.read prints it, fenced: (depth, name, text) for each bullet."""
    page = f"page:{uuid5(_NS, title)}"
    lines = [f"# {title} ({page})"]
    lines += [f"{'  ' * depth}- {text} ({ref(name)})" for depth, name, text in bullets]
    return prompts.fence(page, title, "\n".join(lines))


INCIDENT = outline(
    "Incident review: checkout outage",
    (0, "ticket", "Ticket: PROJ-1234"),
    (0, "impact", "Impact: checkout returned HTTP 502 for 14 minutes on a Tuesday evening"),
    (0, "cause", "Root cause"),
    (1, "pool", "A connection pool of 10 was exhausted when the payment provider slowed down"),
    (1, "retries", "Retries without jitter multiplied the load"),
    (0, "fixes", "Fixes"),
    (1, "breaker", "Raise the pool to 40 and add a circuit breaker around the payment client"),
)
TIPS = outline(
    "Welcome",
    (0, "ask-tip", 'On the command line: subspace ask "what caused the checkout outage?"'),
    (0, "search-tip", 'subspace search "checkout outage", with --explain to see each rank'),
    (0, "restated", "Checkout was down."),
)


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        # The sentence with the duration, not the ones made of the question's own words.
        ("How long was checkout down?", ["impact"]),
        # The bullets under "Root cause", which share no word with the question.
        ("What caused the checkout outage?", ["pool", "retries"]),
        ("Why was checkout down?", ["pool", "retries"]),
    ],
)
def test_the_sentences_that_add_to_the_question_answer_it(
    question: str, expected: list[str]
) -> None:
    answer = ask(question, TIPS, INCIDENT)
    assert [line.rsplit(" [", 1)[1] for line in answer] == [f"{ref(name)}]" for name in expected]


def test_a_sentence_that_only_restates_the_question_is_never_the_answer() -> None:
    restating = prompts.fence(
        ref("a"),
        "Notes",
        "How long was checkout down? Checkout was down. Was checkout down for long?",
    )
    assert ask("How long was checkout down?", restating) == [prompts.NOTHING_FOUND]
    answered = prompts.fence(ref("b"), "Notes", "Checkout was down for 14 minutes.")
    assert ask("How long was checkout down?", restating, answered) == [
        f"- Checkout was down for 14 minutes. [{ref('b')}]"
    ]


def test_a_sentence_that_asks_or_quotes_the_question_is_not_its_answer() -> None:
    """A question in the sources, or a tip suggesting the search, holds the question's words
    without answering them."""
    asks = Sentence("Was the checkout outage caused by the pool resize on Friday?", ref("asks"))
    quotes = Sentence('Try it: subspace search "checkout outage" in a terminal', ref("quotes"))
    answers = Sentence("The checkout outage came from an exhausted connection pool", ref("answers"))
    assert answering("What caused the checkout outage?", [asks, quotes, answers]) == [answers]
    assert answering("checkout outage", [quotes, answers]) == [answers]


def test_a_search_hits_breadcrumb_counts_as_near() -> None:
    """kb.search prints `[kind] Page › crumb — passage (ref)`: the bullet under "Root cause"
    answers from its breadcrumb, as it does from a read page's indentation."""
    hits = "\n".join(
        [
            f'1. [node] Welcome › Ask — subspace ask "what caused the checkout outage?" '
            f"({ref('ask-tip')})",
            f"2. [node] Incident review: checkout outage — Root cause ({ref('cause')})",
            f"3. [node] Incident review: checkout outage › Root cause — Retries without jitter "
            f"multiplied the load ({ref('retries')})",
        ]
    )
    assert ask(
        "What caused the checkout outage?", prompts.fence("kb.search", "kb.search", hits)
    ) == [f"- Retries without jitter multiplied the load [{ref('retries')}]"]
    sentences = [
        Sentence('subspace ask "what caused the checkout outage?"', ref("ask-tip"), ("Welcome",)),
        Sentence("Root cause", ref("cause"), ("Incident review: checkout outage",)),
    ]
    # The heading holds no answer, but it is the one to read.
    assert answering("What caused the checkout outage?", sentences) == []
    assert leading("What caused the checkout outage?", sentences)[0] == sentences[1]


def test_the_kind_asked_for_comes_first_and_alone() -> None:
    sentences = [
        Sentence("The pool slowed down checkout badly", ref("pool"), ()),
        Sentence("Checkout stalled for 14 minutes", ref("impact"), ()),
    ]
    assert answering("How long was checkout down?", sentences) == [sentences[1]]
    # Without a sentence of that kind, the nearest ones answer.
    assert answering("How long was checkout down?", sentences[:1]) == sentences[:1]


@pytest.mark.parametrize(
    ("text", "wants"),
    [
        ("How long was checkout down?", "duration"),
        ("When is the on-call handover?", "time"),
        ("How many retries were there?", "number"),
        ("What caused the checkout outage?", "cause"),
        ("Why did checkout fail?", "cause"),
        ("How do I publish a crate?", "method"),
        ("how to publish an npm package", "method"),
        # A statement asks for nothing, whatever words it holds further on.
        ("Smoking causes lung cancer when started young", None),
        ("What is the checkout outage?", None),
    ],
)
def test_what_a_question_asks_for_is_read_from_its_first_words(
    text: str, wants: str | None
) -> None:
    assert read_question(text).wants == wants


def test_a_how_question_is_answered_by_what_to_do() -> None:
    """Asked how to publish a crate, it quoted what publishing does; the chapter's "Run the
    cargo publish command" is the answer (and "To X, we call Y" is one too)."""
    chapter = ("Publishing a Crate to Crates.io",)
    sentences = [
        Sentence(
            "Publishing a crate uploads a specific version to crates.io.", ref("what"), chapter
        ),
        Sentence("Run the cargo publish command again.", ref("run"), chapter),
        Sentence("To publish a crate, we call the upload function.", ref("to"), chapter),
    ]
    assert set(answering("How do I publish a crate?", sentences)) == set(sentences[1:])
    # Asked what it is, the sentence saying what it does comes first.
    assert answering("What does publishing a crate do?", sentences)[0] == sentences[0]


def test_a_sentence_read_whole_and_seen_in_a_passage_is_quoted_once() -> None:
    sentences = [
        Sentence("Use the form `npm_config_x` for any option.", ref("read"), ()),
        Sentence("Use the form npm_config_x for any option.", ref("passage"), ()),
    ]
    assert answering("how do I set an npm option?", sentences) == sentences[:1]


def test_an_answer_is_prose_never_a_name_or_a_list_of_links() -> None:
    sentences = [
        Sentence("ch14-03-cargo-workspaces.html", ref("name"), ("Cargo Workspaces",)),
        Sentence("See Also - cargo workspaces - cargo publish - cargo login", ref("links"), ()),
        Sentence("A cargo workspace shares one Cargo.lock between packages.", ref("prose"), ()),
    ]
    assert answering("what is a cargo workspace", sentences) == sentences[2:]


def test_a_question_mark_inside_a_sentence_does_not_cut_it() -> None:
    chapter = outline(
        "Recoverable Errors with Result",
        (0, "try", "The ? operator returns early with the error. It works in a function."),
    )
    answer = ask("what does the ? operator do with a Result", chapter)
    assert answer[0].startswith("- The ? operator returns early with the error. [node:"), answer


@pytest.mark.parametrize(
    ("text", "ref", "whole"),
    [
        ("If the install", "file:1:2", False),  # a chunk's end cuts it
        ("operator won't convert a Result.", "file:1:2", False),  # a chunk's start cuts it
        ("Installing rustup on Linux", "file:1:2", False),  # a heading
        ("Rustup installs Rust on Linux.", "file:1:2", True),
        ("“Done.”", "mail:1", True),
        ("Install rustup with the script", "node:1", True),  # a bullet is whole as written
    ],
)
def test_a_files_text_is_quoted_by_whole_sentences_only(text: str, ref: str, whole: bool) -> None:
    assert is_whole(Sentence(text, ref)) is whole


def test_a_heading_of_a_file_is_not_an_answer() -> None:
    sentences = [
        Sentence("Rustup on Linux and macOS systems", "file:1:2", ("Installation",)),
        Sentence("Rustup installs Rust on Linux.", "file:1:2", ("Installation",)),
    ]
    assert answering("what is rustup on linux", sentences) == sentences[1:]


def test_the_agent_reads_a_file_it_found_whole() -> None:
    """A search hit shows a file's best chunk; the answer is often a chunk away."""
    chunk = "file:9b2f4b4e-1c1e-4e55-8a55-0c7b1d9e2f11:3"
    messages = [
        Message("system", prompts.AGENT_SYSTEM),
        Message("user", prompts.question_message("how do I spawn a thread?", [])),
        Message("assistant", "", tool_calls=(ToolCall("call_1", "kb.search", {"q": "x"}),)),
        Message(
            "tool",
            f"1. [file] Using Threads — Note that a spawned thread stops when main ends. ({chunk})",
            tool_call_id="call_1",
        ),
    ]
    tools = [ToolDef(name, "", {}) for name in ("kb.search", "kb.read", "kb.node.read")]
    (call,) = FakeChat().complete(messages, tools=tools).tool_calls
    assert (call.name, call.arguments) == ("kb.read", {"ref": chunk.rsplit(":", 1)[0]})


def test_a_sentence_that_says_the_question_words_besides_quoting_them_may_answer() -> None:
    """The npm README's answer quotes "npm is not an acronym" and says npm outside the quotes
    too: it is an answer, not a tip that quotes the question."""
    said = Sentence('npm is a backronym for "npm is not an acronym", a joke.', ref("npm"))
    tip = Sentence('Try subspace ask "what does npm stand for" here.', ref("tip"))
    assert answering("what does npm stand for?", [tip, said]) == [said]


def test_an_instruction_is_read_with_the_command_under_it() -> None:
    page = prompts.fence(
        "file:9b2f4b4e-1c1e-4e55-8a55-0c7b1d9e2f11",
        "npm-publish",
        "Publish the package in the current directory:\nnpm publish\nBy default npm will "
        "publish to the public registry.",
    )
    answer = ask("how to publish an npm package", page)
    assert answer[0].startswith("- Publish the package in the current directory: npm publish ")


def test_a_rare_question_word_outweighs_common_ones() -> None:
    """In a chapter on paths every sentence says "path"; the one about the extension answers."""
    chapter = ("Path",)
    common = [Sentence(f"The path module joins a path {n} and a file.", ref(f"p{n}"), chapter)
              for n in range(5)]  # fmt: skip
    rare = Sentence("The extname method returns the extension of the path.", ref("x"), chapter)
    assert answering("what is the file extension of a path", [*common, rare])[0] == rare
    assert "get" not in read_question("how do I get the file extension?").words


@pytest.mark.parametrize(
    "text",
    [
        "After installing this file, the application MUST run the update-mime-database command.",
        "The path.extname() method returns the extension of the path.",
        "To create a new thread, we call the thread::spawn function.",
        "If you're using Linux or macOS, open a terminal and enter the following command.",
    ],
)
def test_what_to_do_is_said_in_many_ways(text: str) -> None:
    assert is_giving("method", Sentence(text, ref("x")))


def test_a_wrapped_paragraph_of_a_file_is_read_as_its_sentences() -> None:
    spec = prompts.fence(
        "file:9b2f4b4e-1c1e-4e55-8a55-0c7b1d9e2f11",
        "Shared MIME-info Database",
        "Each application installs one XML file (where the user\nrequested it be installed). "
        "After installing this file, the application\nMUST run the update-mime-database command.",
    )
    answer = ask("what do I run after installing a new mime type xml file?", spec)
    assert answer[0].startswith(
        "- After installing this file, the application MUST run the update-mime-database command. ["
    ), answer


def test_an_operator_in_the_question_is_a_word_of_it() -> None:
    """Asked what the ? operator does, a sentence holding it beats one that only says
    "operation" and "result" (five-letter stems take "operation" for "operator")."""
    chapter = ("Recoverable Errors with Result",)
    other = Sentence("The ErrorKind lists what might result from an io operation.", ref("a"),
                     chapter)  # fmt: skip
    answer = Sentence("The ? operator returns the error early from the function.", ref("b"),
                      chapter)  # fmt: skip
    assert answering("what does the ? operator do with a Result", [other, answer])[0] == answer
    assert "?" not in read_question("what is a crate ?").words  # its own stop is no word


def test_an_instruction_is_the_first_answer_to_a_how_question() -> None:
    chapter = ("Publishing a Crate to Crates.io",)
    step = Sentence("Before you can publish crates, you need to create an account on crates.io.",
                    ref("step"), chapter)  # fmt: skip
    run = Sentence("Run the cargo publish command again.", ref("run"), chapter)
    assert answering("how do I publish a crate to crates.io?", [step, run])[0] == run
