"""/rag: an agent loop over the read-only tools (search, grep, read), then the answer.

The model may call tools up to SUBSPACE_RAG_MAX_STEPS times, and reads at most
SUBSPACE_RAG_MAX_CONTEXT_CHARS of their results; then it must answer. A tool that is unknown
or not read-only is refused back to the model as a tool error and never run.
"""

from __future__ import annotations

import json
from typing import Any

from subspace.agents.tools import call_tool
from subspace.answers import prompts
from subspace.answers import strategy_names as names
from subspace.answers.evidence import Evidence
from subspace.answers.replies import CLOSEST_COUNT, ask_model, not_found, raise_if_cancelled
from subspace.answers.sources import without_run_bullets
from subspace.answers.strategy import Answer, AnswerBullet, Job, tool_defs
from subspace.errors import SubspaceError
from subspace.providers.chat import Message, ToolCall

SUMMARY_CHARS = 120  # of a tool result, in the run's steps


class RagStrategy:
    name = names.RAG

    def answer(self, job: Job) -> Answer:
        tools = tool_defs(job.settings)
        allowed = {tool.name for tool in tools}
        evidence = Evidence(job.settings.rag_max_context_chars)
        messages = [
            Message("system", prompts.AGENT_SYSTEM),
            Message("user", prompts.question_message(job.question, [])),
        ]
        steps = 0
        bullets: list[AnswerBullet] = []
        while True:
            raise_if_cancelled(job)
            spent = steps >= job.settings.rag_max_steps or evidence.budget <= 0
            if spent:
                messages.append(Message("user", prompts.BUDGET_REACHED))
            reply, reader = ask_model(job, messages, evidence, tools=() if spent else tools)
            bullets.extend(b for b in reader.bullets if b not in bullets)
            if not reply.tool_calls or spent:
                break
            messages.append(reply)
            for call in reply.tool_calls:
                raise_if_cancelled(job)
                if steps >= job.settings.rag_max_steps:
                    result = "Not run: the tool budget of this answer is spent. Answer now."
                    job.progress.step("tool", f"{call.name}: refused, budget spent",
                                      _data(call, ok=False))  # fmt: skip
                else:
                    steps += 1
                    result = self._run(job, call, allowed, evidence)
                messages.append(Message("tool", result, tool_call_id=call.id))
        if bullets:
            return Answer(found=True, bullets=bullets)
        return not_found(job, evidence.closest(CLOSEST_COUNT))

    def _run(self, job: Job, call: ToolCall, allowed: set[str], evidence: Evidence) -> str:
        """The tool's result as the model reads it (fenced, within the budget), or the error."""
        if call.name not in allowed:
            job.progress.step("tool", f"{_shown(call.name)}: refused, not a read tool",
                              _data(call, ok=False))  # fmt: skip
            return (
                f"Error: no read tool is named {_shown(call.name)}. The tools you may call are "
                f"{', '.join(sorted(allowed))}; nothing can be changed from here."
            )
        if call.error:  # arguments that were not a JSON object
            job.progress.step("tool", f"{call.name}: {_cut(call.error)}", _data(call, ok=False))
            return f"Error: {call.error}"
        try:
            output = without_run_bullets(
                job.cx, call_tool(job.cx, job.searcher, call.name, call.arguments)
            )
        except SubspaceError as exc:
            job.progress.step("tool", f"{call.name}: {exc.message}", _data(call, ok=False))
            return f"Error: {exc.message}"
        text = evidence.take(output)
        evidence.add_text(text)
        first = " ".join(output.split("\n", 1)[0].split())
        lines = output.count("\n") + 1
        summary = f"{call.name} {_args(call)}: {lines} lines" + (f" — {first}" if first else "")
        job.progress.step("tool", _cut(summary), {**_data(call, ok=True), "chars": len(text)})
        if not text:
            return "Not shown: the reading budget of this answer is spent. Answer now."
        return prompts.fence(_source(call), call.name, text)


def _data(call: ToolCall, *, ok: bool) -> dict[str, Any]:
    return {"tool": call.name, "arguments": call.arguments, "ok": ok}


def _source(call: ToolCall) -> str:
    ref = call.arguments.get("ref")
    return ref if isinstance(ref, str) else call.name


def _args(call: ToolCall) -> str:
    return _cut(json.dumps(call.arguments, ensure_ascii=False, sort_keys=True), 60)


def _shown(name: str) -> str:
    return repr(_cut(name, 60))


def _cut(text: str, limit: int = SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
