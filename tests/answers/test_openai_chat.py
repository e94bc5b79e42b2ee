"""The openai chat provider against an OpenAI-compatible stub on 127.0.0.1: streamed text, tool
calls both ways, timeouts, retries, and the errors a user can act on."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator

import pytest

from subspace.answers.strategy import tool_defs
from subspace.config import Settings
from subspace.errors import ConfigError
from subspace.providers.chat import Cancelled, ChatError, Message, ToolCall, ToolDef
from subspace.providers.openai_chat import OpenAIChat, wire_names
from tests.openai_stub import ChatStub, running_chat_stub

QUESTION = [Message("system", "Answer from the sources."), Message("user", "Who wrote it?")]
SEARCH = ToolDef("kb.search", "Search the workspace.", {"type": "object", "properties": {}})


@pytest.fixture
def stub() -> Iterator[ChatStub]:
    with running_chat_stub() as running:
        yield running


def chat_for(
    stub: ChatStub, sleeps: list[float] | None = None, *, key: str = "sk-test", timeout_s: int = 5
) -> OpenAIChat:
    settings = Settings(
        openai_api_key=key,
        openai_base_url=stub.url,
        chat_model="stub-model",
        chat_timeout_s=timeout_s,
    )
    record = sleeps.append if sleeps is not None else (lambda _: None)
    return OpenAIChat(settings, sleep=record)


def test_text_streams_to_on_text_piece_by_piece(stub: ChatStub) -> None:
    stub.script = [{"kind": "text", "pieces": ["Ada ", "wrote ", "it."], "pause": 0.2}]
    arrivals: list[tuple[str, float]] = []
    answer = chat_for(stub).complete(
        QUESTION, on_text=lambda piece: arrivals.append((piece, time.monotonic()))
    )
    assert answer == Message("assistant", "Ada wrote it.")
    assert [piece for piece, _ in arrivals] == ["Ada ", "wrote ", "it."]
    # Each piece is handed over when it arrives, not once the answer is whole.
    assert arrivals[-1][1] - arrivals[0][1] >= 0.3
    sent = stub.requests[0]
    assert sent["stream"] is True
    assert sent["model"] == "stub-model"
    assert "tools" not in sent
    assert sent["messages"] == [
        {"role": "system", "content": "Answer from the sources."},
        {"role": "user", "content": "Who wrote it?"},
    ]


def test_a_tool_call_round_trip(stub: ChatStub) -> None:
    arguments = '{"query": "who wrote the report", "limit": 5}'
    stub.script = [
        {
            "kind": "tool_calls",
            "calls": [{"id": "call_7", "name": "kb_search", "arguments": arguments}],
            "pieces": 4,
        },
        {"kind": "text", "pieces": ["- Ada wrote it ", "[node:1]"]},
    ]
    chat = chat_for(stub)
    tools = tool_defs(Settings())
    shown: list[str] = []
    first = chat.complete(QUESTION, tools=tools, on_text=shown.append)
    assert first.tool_calls == (
        ToolCall("call_7", "kb.search", {"query": "who wrote the report", "limit": 5}),
    )
    assert first.content == ""
    assert shown == []
    offered = stub.requests[0]["tools"]
    assert {tool["function"]["name"] for tool in offered} == {
        wire_names([t.name for t in tools])[t.name] for t in tools
    }
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t["function"]["name"]) for t in offered)
    search = next(t for t in offered if t["function"]["name"] == "kb_search")
    assert search["type"] == "function"
    assert search["function"]["parameters"] == next(
        t.parameters for t in tools if t.name == "kb.search"
    )

    result = Message("tool", "node:1  Ada wrote the report.", tool_call_id="call_7")
    second = chat.complete([*QUESTION, first, result], tools=tools)
    assert second.content == "- Ada wrote it [node:1]"
    assert second.tool_calls == ()
    replayed = stub.requests[1]["messages"][2:]
    assert replayed[0]["role"] == "assistant"
    assert replayed[0]["content"] is None
    (call,) = replayed[0]["tool_calls"]
    assert call["id"] == "call_7"
    assert call["function"]["name"] == "kb_search"
    assert json.loads(call["function"]["arguments"]) == {
        "query": "who wrote the report",
        "limit": 5,
    }
    assert replayed[1] == {
        "role": "tool",
        "tool_call_id": "call_7",
        "content": "node:1  Ada wrote the report.",
    }


@pytest.mark.parametrize(
    ("raw", "problem"),
    [('{"query": "unfinished', "not valid JSON"), ('["a", "list"]', "not an object")],
)
def test_malformed_arguments_become_an_error_for_the_model(
    stub: ChatStub, raw: str, problem: str
) -> None:
    calls = [
        {"id": "c1", "name": "kb_read", "arguments": raw},
        {"id": "c2", "name": "kb_search", "arguments": ""},
    ]
    stub.script = [{"kind": "tool_calls", "calls": calls}]
    tools = [ToolDef("kb.read", "Read a page.", {"type": "object"}), SEARCH]
    bad, empty = chat_for(stub).complete(QUESTION, tools=tools).tool_calls
    assert (bad.id, bad.name, bad.arguments) == ("c1", "kb.read", {})
    assert problem in bad.error
    assert "one JSON object" in bad.error
    assert empty == ToolCall("c2", "kb.search", {})  # no arguments at all is an empty object


def test_tool_names_map_both_ways_without_collisions() -> None:
    names = wire_names(["kb.search", "kb_search", "kb.node.read", "x" * 80])
    assert names["kb.search"] == "kb_search"
    assert names["kb.node.read"] == "kb_node_read"
    assert len(set(names.values())) == 4
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", wire) for wire in names.values())


def test_a_timeout_fails_at_once_naming_the_setting(stub: ChatStub) -> None:
    stub.script = [{"kind": "sleep", "seconds": 2.5}]
    sleeps: list[float] = []
    started = time.monotonic()
    with pytest.raises(ChatError, match="SUBSPACE_CHAT_TIMEOUT_S") as caught:
        chat_for(stub, sleeps, timeout_s=1).complete(QUESTION)
    assert caught.value.reason == "timeout"
    assert len(stub.requests) == 1
    assert sleeps == []
    assert time.monotonic() - started < 2.4


def test_a_stream_that_goes_silent_after_text_is_not_retried(stub: ChatStub) -> None:
    stub.script = [{"kind": "stall", "pieces": ["- Ada ", "wrote"], "seconds": 2.5}]
    shown: list[str] = []
    with pytest.raises(ChatError) as caught:
        chat_for(stub, timeout_s=1).complete(QUESTION, on_text=shown.append)
    assert caught.value.reason == "timeout"
    assert shown == ["- Ada ", "wrote"]
    assert len(stub.requests) == 1


def test_a_cut_stream_is_retried_only_before_any_text(stub: ChatStub) -> None:
    stub.script = [{"kind": "cut", "pieces": []}, {"kind": "text", "pieces": ["whole"]}]
    sleeps: list[float] = []
    assert chat_for(stub, sleeps).complete(QUESTION).content == "whole"
    assert len(stub.requests) == 2
    assert len(sleeps) == 1

    stub.script = [{"kind": "cut", "pieces": ["- half an"]}]
    shown: list[str] = []
    with pytest.raises(ChatError, match="middle of its answer"):
        chat_for(stub).complete(QUESTION, on_text=shown.append)
    assert shown == ["- half an"]
    assert len(stub.requests) == 3


def test_429_waits_as_retry_after_says_then_succeeds(stub: ChatStub) -> None:
    stub.script = [
        {"kind": "status", "code": 429, "headers": {"retry-after": "3"}, "message": "slow down"},
        {"kind": "text", "pieces": ["fine"]},
    ]
    sleeps: list[float] = []
    shown: list[str] = []
    assert chat_for(stub, sleeps).complete(QUESTION, on_text=shown.append).content == "fine"
    assert sleeps == [3.0]
    assert len(stub.requests) == 2
    assert shown == ["fine"]


def test_5xx_backs_off_then_gives_up(stub: ChatStub) -> None:
    stub.script = [{"kind": "status", "code": 502}] * 4
    sleeps: list[float] = []
    with pytest.raises(ChatError, match="failed 4 times") as caught:
        chat_for(stub, sleeps).complete(QUESTION)
    assert caught.value.reason == "error"
    assert len(stub.requests) == 4
    assert len(sleeps) == 3
    assert sleeps[0] < sleeps[2]


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_key_fails_at_once_naming_the_setting(stub: ChatStub, code: int) -> None:
    stub.script = [{"kind": "status", "code": code, "message": "Incorrect API key provided"}]
    sleeps: list[float] = []
    with pytest.raises(ChatError) as caught:
        chat_for(stub, sleeps).complete(QUESTION)
    assert caught.value.message == (
        f"The chat server refused the key ({code}). Check OPENAI_API_KEY."
    )
    assert caught.value.reason == "auth"
    assert len(stub.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "message",
    [
        "registry.ollama.ai/library/gemma:2b does not support tools",  # Ollama
        "tools is not supported with this model",  # OpenAI
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    ],
)
def test_a_model_without_tools_says_what_to_do(stub: ChatStub, message: str) -> None:
    stub.script = [{"kind": "status", "code": 400, "message": message}]
    with pytest.raises(ChatError) as caught:
        chat_for(stub).complete(QUESTION, tools=[SEARCH])
    error = caught.value
    assert error.reason == "no_tools"
    assert len(stub.requests) == 1
    assert "'stub-model'" in error.message
    assert message in error.message
    assert error.message.endswith(
        "Set SUBSPACE_CHAT_MODEL to a model with tool calling, or ask with /rag-direct, "
        "which needs none."
    )


def test_another_bad_request_is_not_taken_for_missing_tools(stub: ChatStub) -> None:
    message = "Invalid schema for function 'kb_search': format 'uuid' is not supported"
    stub.script = [{"kind": "status", "code": 400, "message": message}]
    with pytest.raises(ChatError, match="rejected the request") as caught:
        chat_for(stub).complete(QUESTION, tools=[SEARCH])
    assert caught.value.reason == "error"
    assert len(stub.requests) == 1


def test_a_refused_connection_fails_at_once() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleeps: list[float] = []
    settings = Settings(openai_base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ChatError, match="OPENAI_BASE_URL") as caught:
        OpenAIChat(settings, sleep=sleeps.append).complete(QUESTION)
    assert caught.value.reason == "refused"
    assert sleeps == []


def test_cancelled_in_on_text_closes_the_stream(stub: ChatStub) -> None:
    stub.script = [{"kind": "text", "pieces": [f"piece {i} " for i in range(20)], "pause": 0.05}]
    shown: list[str] = []

    def stop_after_two(piece: str) -> None:
        shown.append(piece)
        if len(shown) == 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        chat_for(stub).complete(QUESTION, on_text=stop_after_two)
    assert shown == ["piece 0 ", "piece 1 "]
    assert len(stub.requests) == 1
    deadline = time.monotonic() + 3
    while stub.left == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stub.left == 1  # the server saw the client go, well before its 20 pieces


def test_a_local_server_needs_no_key(stub: ChatStub) -> None:
    assert chat_for(stub, key="").complete(QUESTION).content == "ok"
    assert stub.keys == ["Bearer no-key"]
    assert chat_for(stub, key="sk-real").complete(QUESTION).content == "ok"
    assert stub.keys[1] == "Bearer sk-real"


def test_openai_itself_needs_a_key() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        OpenAIChat(Settings(openai_api_key="", openai_base_url=""))


def test_a_chat_server_of_its_own_answers_while_the_bundled_model_embeds(stub: ChatStub) -> None:
    """SUBSPACE_CHAT_URL (a local Ollama, say) writes the answers; embeddings stay with the
    provider PROVIDERS or the default picks, and no key is needed."""
    from subspace.answers.answerer import create_chat_provider
    from subspace.providers.registry import provider_name

    settings = Settings(providers="fake", chat_url=stub.url, chat_model="llama3.2")
    chat = create_chat_provider(settings)
    assert isinstance(chat, OpenAIChat)
    assert (chat.base_url, chat.model) == (stub.url, "llama3.2")
    assert provider_name(settings) == "fake"
    stub.script = [{"kind": "text", "pieces": ["Ada wrote it."]}]
    assert chat.complete(QUESTION).content == "Ada wrote it."
    assert stub.requests[0]["model"] == "llama3.2"
