"""The interface every answering strategy implements, and what a run hands it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from subspace.agents import tools
from subspace.config import Settings
from subspace.context import Context
from subspace.providers.chat import ChatProvider, ToolDef
from subspace.search.searcher import Searcher


@dataclass(frozen=True)
class AnswerBullet:
    text: str
    refs: list[str]  # refs the run retrieved, as node:<id>, file:<id>:<n>, mail:<id>, page:<id>


class Progress(Protocol):
    """Where a strategy reports as it goes; the run engine records and streams it."""

    def step(self, kind: str, summary: str, data: dict[str, Any]) -> None:
        """A tool call and its short result (kind "tool"), or another visible step."""

    def bullet(self, bullet: AnswerBullet) -> None:
        """An answer bullet, its refs checked, ready to be written."""

    def cancelled(self) -> bool:
        """Whether the run was cancelled: stop at the next step or bullet."""


@dataclass
class Job:
    cx: Context
    searcher: Searcher
    chat: ChatProvider
    question: str
    settings: Settings
    progress: Progress

    def __post_init__(self) -> None:
        # A run cites sources, never the workspace's earlier answers (answers/sources.py),
        # whichever searcher it was handed.
        self.searcher = self.searcher.for_answers()


@dataclass
class Answer:
    found: bool
    bullets: list[AnswerBullet] = field(default_factory=list)
    closest: list[str] = field(default_factory=list)  # when not found: the closest hits' refs


class Strategy(Protocol):
    name: str

    def answer(self, job: Job) -> Answer: ...


def tool_defs(settings: Settings) -> list[ToolDef]:
    """The agent tools a model may call: read-only ones only. A tool that writes needs a
    person's approval, which a run cannot give, so it is never offered."""
    return [
        ToolDef(spec.name, spec.description, spec.input_schema(settings))
        for spec in tools.TOOLS
        if spec.read_only and not spec.needs_approval
    ]
