"""The openai chat provider: streamed chat completions with tool calls, from OpenAI or any
compatible server (Ollama, vLLM) at OPENAI_BASE_URL."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2  # the HTTP client the openai SDK is built on

from subspace.config import Settings
from subspace.errors import ConfigError
from subspace.providers.breaker import failure_reason
from subspace.providers.chat import (
    Cancelled,
    ChatError,
    ChatFailure,
    Message,
    ToolCall,
    ToolDef,
)
from subspace.providers.retry import backoff, retry_after

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionChunk

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 4  # one call and three retries, as the embedding provider makes
# A local server (Ollama, vLLM) may take no key, but the SDK insists on one.
PLACEHOLDER_KEY = "no-key"
_WIRE_NAME = re.compile(r"[^a-zA-Z0-9_-]")  # what OpenAI refuses in a function name
MAX_WIRE_NAME = 64  # OpenAI's limit on a function name
# How servers say a model cannot take tools: Ollama "<model> does not support tools", OpenAI
# "tools is not supported with this model", vLLM "auto tool choice requires
# --enable-auto-tool-choice". A schema error that merely names a function is not one of them.
_TOOLISH = r"\b(tools?|tool[ _-]?(choice|calling|use)|function[ _-]?calling|functions?)\b"
_NO_TOOLS = re.compile(
    rf"(support|enable)\w*[^.:]{{0,40}}{_TOOLISH}"
    rf"|{_TOOLISH}[^.:'\"]{{0,25}}\bnot (supported|enabled)",
    re.IGNORECASE,
)
ERROR_EXCERPT_CHARS = 300  # of a server's error message, quoted in ours


class StreamCut(Exception):
    """The stream ended before the model said it had finished (no finish_reason came)."""


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _Streamed:
    """Whether any text reached the caller; once it has, a failure is not retried, because
    the caller may have shown or written it and a second answer would repeat it."""

    def __init__(self, on_text: Callable[[str], None] | None) -> None:
        self.on_text = on_text
        self.any = False

    def __call__(self, piece: str) -> None:
        self.any = True
        if self.on_text is not None:
            self.on_text(piece)


class OpenAIChat:
    """Chat completions over the official SDK, streamed (stream=True) with tools.

    `complete()` passes each text delta to `on_text` as it arrives and returns the whole
    assistant message. Tool calls are put together from their streamed pieces; arguments that
    are not a JSON object come back with arguments {} and `error` set (a sentence for the model).
    Our tool names hold dots (kb.search), which OpenAI refuses, so they travel as kb_search and
    are mapped back before the caller sees them.

    429 (honouring Retry-After), 5xx and dropped connections are retried with bounded backoff,
    but only while no text has been streamed to `on_text`: after that the failure is raised.
    A timeout (SUBSPACE_CHAT_TIMEOUT_S, while connecting or between streamed pieces) and a
    refused connection are not retried: a run would only wait longer for the same failure.
    Every failure is a ChatError whose message ends with what to do; a Cancelled raised by
    `on_text` closes the stream and propagates.
    """

    name = "openai"

    def __init__(self, settings: Settings, *, sleep: Callable[[float], None] = time.sleep) -> None:
        from openai import OpenAI

        key = settings.openai_api_key
        base_url = settings.chat_url or settings.openai_base_url
        if not key and not base_url:
            raise ConfigError(
                "OPENAI_API_KEY is not set. Set it, point OPENAI_BASE_URL at a compatible "
                "server such as Ollama, or run with PROVIDERS=fake."
            )
        self.model = settings.chat_model
        self.timeout_s = settings.chat_timeout_s
        self.base_url = base_url or "https://api.openai.com/v1"
        # 0 waits without limit; otherwise the limit applies to connecting and to each read,
        # so a long answer that keeps streaming is never cut off.
        timeout = float(settings.chat_timeout_s) if settings.chat_timeout_s else None
        # Retries are ours, so Retry-After, the attempt budget and the rule about streamed
        # text are handled in one place.
        self._client = OpenAI(
            api_key=key or PLACEHOLDER_KEY,
            base_url=base_url or None,
            timeout=timeout,
            max_retries=0,
        )
        self._sleep = sleep

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDef] = (),
        on_text: Callable[[str], None] | None = None,
    ) -> Message:
        names = wire_names([tool.name for tool in tools])
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [_wire_message(m, names) for m in messages],
            "stream": True,
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": names[tool.name],
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in tools
            ]
        ours = {wire: name for name, wire in names.items()}
        for attempt in range(1, MAX_ATTEMPTS + 1):
            streamed = _Streamed(on_text)
            try:
                return self._stream(request, ours, streamed)
            except Cancelled:
                raise
            except Exception as exc:
                delay = self._retry_delay(exc, attempt, streamed.any, bool(tools))
                if attempt == MAX_ATTEMPTS:
                    raise ChatError(
                        f"The chat server at {self.base_url} failed {MAX_ATTEMPTS} times in a "
                        f"row ({_excerpt(exc)}). Try again later.",
                        reason=_reason(exc),
                    ) from exc
                log.warning("chat call failed (%s); retrying in %.1f s", _excerpt(exc), delay)
                self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _stream(self, request: dict[str, Any], ours: dict[str, str], emit: _Streamed) -> Message:
        stream = self._client.chat.completions.create(**request)
        try:
            return _assemble(stream, ours, emit)
        finally:
            stream.close()  # also when on_text raised Cancelled: the server stops generating

    def _retry_delay(self, exc: Exception, attempt: int, streamed: bool, tools: bool) -> float:
        """The seconds to wait before trying `exc`'s call again; raises when it must not be."""
        import openai

        if isinstance(exc, ChatError):
            raise exc
        if not isinstance(exc, openai.OpenAIError | httpx2.HTTPError | StreamCut):
            raise exc  # a fault of ours, not the server's: trying again would not help
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            raise ChatError(
                f"The chat server refused the key ({exc.status_code}). Check OPENAI_API_KEY.",
                reason="auth",
            ) from exc
        reason = _reason(exc)
        if reason == "timeout":
            raise ChatError(
                f"The chat model {self.model!r} at {self.base_url} went {self.timeout_s} s "
                "without sending anything. "
                "Try again, use a faster model, or raise SUBSPACE_CHAT_TIMEOUT_S.",
                reason="timeout",
            ) from exc
        if reason == "refused":
            raise ChatError(
                f"Nothing answers at {self.base_url}: the connection was refused. Start the "
                "chat server, or fix OPENAI_BASE_URL.",
                reason="refused",
            ) from exc
        status = getattr(exc, "status_code", None)
        if tools and (status is None or status < 500) and _says_no_tools(exc):
            raise ChatError(
                f"The chat model {self.model!r} does not support tool calls "
                f"({_excerpt(exc)}). Set SUBSPACE_CHAT_MODEL to a model with tool calling, "
                "or ask with /rag-direct, which needs none.",
                reason="no_tools",
            ) from exc
        retryable = (
            isinstance(exc, openai.RateLimitError)
            or (isinstance(exc, openai.APIStatusError) and exc.status_code >= 500)
            or isinstance(exc, openai.APIConnectionError | httpx2.TransportError | StreamCut)
        )
        if not retryable:
            raise ChatError(
                f"The chat server rejected the request ({_excerpt(exc)}). Check "
                "SUBSPACE_CHAT_MODEL and OPENAI_BASE_URL.",
                reason="error",
            ) from exc
        if streamed:
            raise ChatError(
                f"The chat server stopped in the middle of its answer ({_excerpt(exc)}). "
                "Ask again.",
                reason="error",
            ) from exc
        if isinstance(exc, openai.RateLimitError):
            return retry_after(exc) or backoff(attempt)
        return backoff(attempt)


def wire_names(names: Iterable[str]) -> dict[str, str]:
    """Each tool name mapped to one OpenAI accepts (letters, digits, _ and -, at most 64):
    kb.search -> kb_search. Two names that would collide get distinct suffixes."""
    mapped: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        wire = _WIRE_NAME.sub("_", name)[:MAX_WIRE_NAME] or "tool"
        suffix = 2
        while wire in taken:
            tail = f"_{suffix}"
            wire = _WIRE_NAME.sub("_", name)[: MAX_WIRE_NAME - len(tail)] + tail
            suffix += 1
        mapped[name] = wire
        taken.add(wire)
    return mapped


def _wire_message(message: Message, names: dict[str, str]) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            # OpenAI takes null content beside tool calls; some servers refuse an empty string.
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": names.get(call.name) or wire_names([call.name])[call.name],
                        "arguments": json.dumps(call.arguments),
                    },
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _assemble(
    chunks: Iterable[ChatCompletionChunk], ours: dict[str, str], emit: _Streamed
) -> Message:
    """The assistant message from its streamed chunks, sending text deltas to `emit`."""
    text: list[str] = []
    calls: dict[int, _PartialCall] = {}
    finished = False
    for chunk in chunks:
        for choice in chunk.choices[:1]:  # we ask for one choice; a server may still number it
            finished = finished or choice.finish_reason is not None
            delta = choice.delta
            piece = delta.content or delta.refusal
            if piece:
                text.append(piece)
                emit(piece)
            for part in delta.tool_calls or ():
                call = calls.setdefault(part.index, _PartialCall())
                if part.id:
                    call.id = part.id
                if part.function is not None:
                    # The name arrives whole in a call's first piece; some servers repeat it.
                    if part.function.name:
                        call.name = part.function.name
                    if part.function.arguments:
                        call.arguments.append(part.function.arguments)
    if not finished:
        # A dropped connection ends a server-sent stream like a finished one; only the
        # missing finish_reason tells a cut answer from a whole one.
        raise StreamCut("the stream ended before a finish_reason")
    return Message(
        role="assistant",
        content="".join(text),
        tool_calls=tuple(_tool_call(index, calls[index], ours) for index in sorted(calls)),
    )


def _tool_call(index: int, partial: _PartialCall, ours: dict[str, str]) -> ToolCall:
    call_id = partial.id or f"call_{index}"  # a server may omit ids; the answer must name one
    name = ours.get(partial.name, partial.name)
    raw = "".join(partial.arguments).strip()
    if not raw:
        return ToolCall(call_id, name, {})
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        problem = f"is not valid JSON ({exc.msg} at character {exc.pos})"
    else:
        if isinstance(arguments, dict):
            return ToolCall(call_id, name, arguments)
        problem = f"is a JSON {type(arguments).__name__}, not an object"
    return ToolCall(
        call_id,
        name,
        {},
        error=(
            f"The arguments of this {name} call {problem}: {raw[:200]!r}. Call it again with "
            "the arguments as one JSON object."
        ),
    )


def _says_no_tools(exc: Exception) -> bool:
    return bool(_NO_TOOLS.search(str(getattr(exc, "message", "") or exc)))


def _reason(exc: BaseException) -> ChatFailure:
    reason = failure_reason(exc)
    return "timeout" if reason == "timeout" else "refused" if reason == "refused" else "error"


def _excerpt(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    message = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    message = " ".join(message.split())[:ERROR_EXCERPT_CHARS]
    return f"{status}: {message}" if status else message
