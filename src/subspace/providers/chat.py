"""The chat protocol the answering strategies speak: messages, tool calls, streamed text.
Chat models sit beside the embedding models: OpenAI-compatible ones in openai_chat.py; the
offline answerer that stands in for one quotes the workspace (answers/fake_chat.py).

A provider streams the assistant's text to `on_text` as it arrives and returns the whole
assistant message, with any tool calls it asked for. Only read-only tools are ever offered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]
ChatFailure = Literal["auth", "no_tools", "timeout", "refused", "error"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # Set when the model's arguments were not a JSON object: `arguments` is {} and this says
    # what was wrong, in a sentence for the model, which gets it back instead of a result.
    error: str = ""


@dataclass(frozen=True)
class Message:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # on a tool message: the call it answers


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments


class ChatError(Exception):
    """A chat call failed; `message` says what to do, `reason` why (for run records)."""

    def __init__(self, message: str, *, reason: ChatFailure = "error") -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class Cancelled(Exception):
    """Raised by a caller's `on_text` (or between steps) to stop a run that was cancelled."""


class ChatProvider(Protocol):
    name: str
    model: str

    def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolDef] = (),
        on_text: Callable[[str], None] | None = None,
    ) -> Message: ...
