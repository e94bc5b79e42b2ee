"""/api/ask and /api/runs: asking a question, following its answer as it streams, cancelling."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from subspace.answers import runs
from subspace.answers.step_waker import StepWaker
from subspace.answers.strategy_names import NAMES, RAG
from subspace.api.auth import require_context
from subspace.api.bodies import RequestBody
from subspace.api.openapi import BY_ID, error_responses
from subspace.context import Context
from subspace.errors import InvalidInput, TooMany

log = logging.getLogger(__name__)
router = APIRouter(tags=["answers"], responses=error_responses(*BY_ID))
CX = Annotated[Context, Depends(require_context)]

STREAMS_PER_USER = 4  # open event streams one user may hold; a page shows one run at a time
STREAMS_PER_WORKSPACE = 16  # ... one workspace may hold
STREAMS_IN_ALL = 100  # ... the server serves at once, far below its connection cap
# A stream ends after this long, whatever its run does; a browser's EventSource reconnects
# with Last-Event-ID and resumes. Its connection and slot cannot be held for ever.
STREAM_MAX_S = 300.0
POLL_S = 0.25  # how often a stream reads new steps when no notification wakes it
WOKEN_POLL_S = 1.0  # ... and when the server's StepWaker does (a missed notification)
HEARTBEAT_S = 15.0  # a comment line keeps proxies from closing an idle stream


class AskIn(RequestBody):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"question": "When does the beta ship?", "strategy": "rag"}]
        }
    )

    question: str
    strategy: str = Field(
        default=RAG, description="How to answer.", json_schema_extra={"enum": list(NAMES)}
    )
    # the page to file the question on (as its last bullet), or the bullet to answer under
    page_id: UUID | None = None
    node_id: UUID | None = None


class AskOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "run_id": "5d1e2f3a-4b5c-4d6e-8f70-1a2b3c4d5e6f",
                    "page_id": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                    "node_id": "7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                    "status": "queued",
                    "events": "/api/runs/5d1e2f3a-4b5c-4d6e-8f70-1a2b3c4d5e6f/events",
                }
            ]
        }
    )

    run_id: UUID
    page_id: UUID
    node_id: UUID  # the "/rag …" bullet the answer is written under
    status: str
    events: str  # the run's server-sent events


class AnswerOut(BaseModel):
    id: UUID  # the answer bullet
    text: str
    refs: list[str]


class RunOut(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "5d1e2f3a-4b5c-4d6e-8f70-1a2b3c4d5e6f",
                    "page_id": "0b5c2d71-3e9f-4a8b-b6c4-1d2e3f4a5b6c",
                    "node_id": "7e1a9f3c-2b4d-4c6e-8f0a-1b2c3d4e5f60",
                    "strategy": "rag",
                    "question": "When does the beta ship?",
                    "status": "done",
                    "found": True,
                    "error": None,
                    "cancel_requested": False,
                    "created_at": "2026-12-01T09:00:00Z",
                    "started_at": "2026-12-01T09:00:00Z",
                    "finished_at": "2026-12-01T09:00:02Z",
                    "steps": [
                        {
                            "seq": 3,
                            "kind": "tool",
                            "summary": "kb.search beta ship: 4 hits",
                            "data": {"tool": "kb.search"},
                            "at": "2026-12-01T09:00:01Z",
                        }
                    ],
                    "answer": [
                        {
                            "id": "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
                            "text": "The beta ships on Friday.",
                            "refs": ["node:9a8b7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d"],
                        }
                    ],
                }
            ]
        }
    )

    id: UUID
    page_id: UUID
    node_id: UUID
    strategy: str
    question: str
    status: str  # queued, running, done, failed or cancelled
    found: bool | None
    error: str | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    steps: list[runs.Step]
    answer: list[AnswerOut]


class CancelOut(BaseModel):
    run_id: UUID
    status: str
    cancel_requested: bool
    message: str


def events_path(run_id: UUID) -> str:
    return f"/api/runs/{run_id}/events"


@router.post("/api/ask", status_code=202)
def ask(body: AskIn, cx: CX) -> AskOut:
    """File the question as a "/<strategy> <question>" bullet and queue its run. The answer
    streams from `events` and is written as child bullets of `node_id`."""
    run = runs.enqueue_run(
        cx, body.question, body.strategy, page_id=body.page_id, node_id=body.node_id
    )
    return AskOut(
        run_id=run.id,
        page_id=run.page_id,
        node_id=run.node_id,
        status=run.status,
        events=events_path(run.id),
    )


def run_out(cx: Context, run_id: UUID) -> RunOut:
    with cx.transaction() as conn:
        run = runs.get_run(conn, cx.actor.workspace_id, run_id)
        steps = runs.list_steps(conn, cx.actor.workspace_id, run_id)
    return RunOut(
        id=run.id,
        page_id=run.page_id,
        node_id=run.node_id,
        strategy=run.strategy,
        question=run.question,
        status=run.status,
        found=run.found,
        error=run.error,
        cancel_requested=run.cancel_requested,
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        steps=steps,
        answer=[AnswerOut(**bullet) for bullet in runs.answer_of(steps)],
    )


@router.get("/api/runs/{run_id}")
def get_run(run_id: UUID, cx: CX) -> RunOut:
    """The run, every step it took (tool calls and their short results) and its answer."""
    return run_out(cx, run_id)


@router.post("/api/runs/{run_id}/cancel")
def cancel_run(run_id: UUID, cx: CX) -> CancelOut:
    """Stop the run at its next step or bullet; bullets already written stay."""
    run, going = runs.request_cancel(cx, run_id)
    if going:
        message = (
            "The run was cancelled."
            if run.status == "cancelled"
            else "The run stops at its next step; the bullets it wrote stay."
        )
    else:
        message = f"The run had already finished ({run.status}); nothing to cancel."
    return CancelOut(
        run_id=run.id, status=run.status, cancel_requested=run.cancel_requested, message=message
    )


class StreamSlots:
    """Counts the open event streams of each user, of each workspace and in all.

    A stream holds a connection for as long as its run goes on, so each holder is bounded:
    one user cannot take a workspace's streams, nor one workspace the server's.
    """

    def __init__(
        self,
        per_user: int = STREAMS_PER_USER,
        per_workspace: int = STREAMS_PER_WORKSPACE,
        in_all: int = STREAMS_IN_ALL,
    ) -> None:
        self.per_user = per_user
        self.per_workspace = per_workspace
        self.in_all = in_all
        self._users: Counter[tuple[UUID, UUID]] = Counter()
        self._workspaces: Counter[UUID] = Counter()
        self._lock = threading.Lock()

    def take(self, who: tuple[UUID, UUID]) -> None:
        """Count one more stream of `who` (workspace, user), or raise TooMany."""
        workspace = who[0]
        with self._lock:
            if self._users[who] >= self.per_user:
                refusal = (
                    f"This user already follows {self.per_user} runs' events, the most one may"
                )
            elif self._workspaces[workspace] >= self.per_workspace:
                refusal = (
                    f"This workspace already has {self.per_workspace} event streams open, the "
                    "most one may"
                )
            elif self._workspaces.total() >= self.in_all:
                refusal = f"The server already serves {self.in_all} event streams, the most it may"
            else:
                self._users[who] += 1
                self._workspaces[workspace] += 1
                return
        raise TooMany(f"{refusal}. Close one, or read the run with GET /api/runs/{{id}}.")

    def give_back(self, who: tuple[UUID, UUID]) -> None:
        with self._lock:
            self._users[who] -= 1
            self._workspaces[who[0]] -= 1
            # Counter keeps zeros; a server that met many users would keep them all.
            if not self._users[who]:
                del self._users[who]
            if not self._workspaces[who[0]]:
                del self._workspaces[who[0]]


def stream_slots(request: Request) -> StreamSlots:
    slots = getattr(request.app.state, "run_streams", None)
    if slots is None:
        slots = request.app.state.run_streams = StreamSlots()
    assert isinstance(slots, StreamSlots)
    return slots


def sse(event: str, data: dict[str, Any], seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


EVENT_OF_KIND = {"tool": "step", "error": "step", "bullet": "bullet", "status": "status"}


def _resume_after(last_event_id: str | None) -> int:
    """The step seq to resume after: an empty Last-Event-ID (a stream whose last event had no
    id) is the same as none."""
    value = (last_event_id or "").strip()
    if not value:
        return 0
    if not (value.isascii() and value.isdigit()) or len(value) > 9:
        raise InvalidInput(
            "Last-Event-ID must be the id of an event of this stream (a whole number); leave it "
            "out to stream from the start."
        )
    return int(value)


@router.get(
    "/api/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Server-sent events: `step` (a tool call and its short result), "
            "`bullet` ({id, text, refs}), `status`, then `done` ({status, found}). Each "
            "event's id is the step's seq; send Last-Event-ID to resume after it.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        429: error_responses(429)[429],
    },
)
async def run_events(
    run_id: UUID,
    request: Request,
    cx: CX,
    last_event_id: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """The run's progress and answer as they are written, from any process executing it;
    ends after `done`, or after 5 minutes (reconnect with Last-Event-ID to go on). At most 4
    streams per user, 16 per workspace; a heartbeat comment every 15 s."""
    ws = cx.actor.workspace_id
    await run_in_threadpool(run_out, cx, run_id)  # 404 before the stream starts
    resume_after = _resume_after(last_event_id)

    def read(after: int) -> tuple[runs.Run, list[runs.Step]]:
        with cx.transaction() as conn:
            return runs.get_run(conn, ws, run_id), runs.list_steps(conn, ws, run_id, after=after)

    slots = stream_slots(request)
    who = (ws, cx.actor.user_id)
    slots.take(who)

    waker: StepWaker | None = getattr(request.app.state, "step_waker", None)
    woken = waker.watch(run_id) if waker is not None else None

    async def stream() -> AsyncIterator[str]:
        after = resume_after
        last_sent = started = time.monotonic()
        try:
            while time.monotonic() - started < STREAM_MAX_S and not await request.is_disconnected():
                if woken is not None:
                    woken.clear()  # before the read: a step written after it wakes us
                run, steps = await run_in_threadpool(read, after)
                for step in steps:
                    yield sse(
                        EVENT_OF_KIND.get(step.kind, "step"),
                        step.data | {"summary": step.summary},
                        step.seq,
                    )
                    after = step.seq
                    last_sent = time.monotonic()
                    if runs.is_last(step):
                        break
                if run.finished and (not steps or runs.is_last(steps[-1])):
                    yield sse("done", {"status": run.status, "found": run.found})
                    return
                if time.monotonic() - last_sent >= HEARTBEAT_S:
                    yield ": heartbeat\n\n"
                    last_sent = time.monotonic()
                if woken is None:
                    await asyncio.sleep(POLL_S)
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), WOKEN_POLL_S)
        finally:
            slots.give_back(who)
            if waker is not None and woken is not None:
                waker.unwatch(run_id, woken)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )
