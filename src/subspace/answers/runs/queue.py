"""The run queue: filing a question (its asking bullet and its row of kb.runs), reading runs
and their steps, recording a step, asking a run to stop. Whoever executes a run writes its
steps to kb.run_steps; streams read them, so any process can stream any run."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast
from uuid import UUID

from subspace import commands
from subspace.answers.strategy_names import NAMES as STRATEGY_NAMES
from subspace.commands.retry import retried
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.db.locks import SERVER_LOCK_KEY
from subspace.db.pool import Conn
from subspace.errors import Conflict, InvalidInput, NotFound
from subspace.text import is_clean

log = logging.getLogger(__name__)


CHANNEL = "subspace_runs"  # a run was queued: wakes the workers
STEPS_CHANNEL = "subspace_run_steps"  # a run wrote a step: wakes its streams
MAX_QUESTION_CHARS = 2_000  # as long as a search query may be
QUESTIONS_PAGE = "Questions"  # where a question asked with no page or bullet is filed
STOPPED = "The answer stopped: the server running it stopped."

Status = Literal["queued", "running", "done", "failed", "cancelled"]
FINISHED: tuple[Status, ...] = ("done", "failed", "cancelled")
RUN_COLUMNS = (
    "workspace_id, id, user_id, page_id, node_id, strategy, question, status, found, error, "
    "cancel_requested, created_at, started_at, finished_at"
)


@dataclass
class Run:
    workspace_id: UUID
    id: UUID
    user_id: UUID
    page_id: UUID
    node_id: UUID
    strategy: str
    question: str
    status: Status
    found: bool | None
    error: str | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


@dataclass
class Step:
    seq: int
    kind: str  # tool, bullet, status or error
    summary: str
    data: dict[str, Any]
    at: datetime


# -- filing a question -----------------------------------------------------------------------


def check_question(question: object) -> str:
    """The question trimmed, or InvalidInput naming what is wrong with it."""
    if not isinstance(question, str):
        raise InvalidInput("The question must be text.")
    question = question.strip()
    if not question:
        raise InvalidInput("The question is empty. Type what you want to know.")
    if len(question) > MAX_QUESTION_CHARS:
        raise InvalidInput(
            f"The question is {len(question):,} characters; the limit is "
            f"{MAX_QUESTION_CHARS:,}. Shorten it."
        )
    if not is_clean(question, MAX_QUESTION_CHARS):
        raise InvalidInput(
            "The question contains a NUL byte or a lone surrogate, which cannot be searched. "
            "Remove it."
        )
    return question


def check_strategy(strategy: object) -> str:
    if strategy not in STRATEGY_NAMES:
        raise InvalidInput(
            f"Unknown strategy {strategy!r}. Use one of: {', '.join(STRATEGY_NAMES)}."
        )
    assert isinstance(strategy, str)
    return strategy


def command_text(strategy: str, question: str) -> str:
    """The bullet that asks: `/rag what is the plan?`."""
    return f"/{strategy} {question}"


@retried
def enqueue_run(
    cx: Context,
    question: str,
    strategy: str = "rag",
    *,
    page_id: UUID | None = None,
    node_id: UUID | None = None,
) -> Run:
    """File the asking bullet and queue the run; a worker is woken by NOTIFY.

    The bullet is a child of `node_id`, or `node_id` itself when its text already asks this
    question; else the last top-level bullet of `page_id`; else one on a "Questions" page
    (created when there is none).
    """
    question = check_question(question)
    strategy = check_strategy(strategy)
    text = command_text(strategy, question)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        bound = cx.on(conn)
        if node_id is not None:
            node = queries.get_node(conn, ws, node_id)
            page = queries.get_page(conn, ws, node.page_id)
            if page.deleted_at is not None:
                raise Conflict(
                    f"Page {page.id} is deleted, so it takes no new bullets. Restore the page "
                    f"first (POST /api/pages/{page.id}/restore), then ask again."
                )
            if page_id is not None and page_id != page.id:
                raise InvalidInput(f"Node {node_id} is on another page than {page_id}; give one.")
            if " ".join(node.text.split()) != " ".join(text.split()):
                node = commands.add_node(bound, page.id, text, parent_id=node.id)
        else:
            if page_id is None:
                page_id = _questions_page(bound, conn)
            node = commands.add_node(bound, page_id, text)
        row = conn.execute(
            f"insert into kb.runs (workspace_id, user_id, page_id, node_id, strategy, question) "
            f"values (%s, %s, %s, %s, %s, %s) returning {RUN_COLUMNS}",
            (ws, cx.actor.user_id, node.page_id, node.id, strategy, question),
        ).fetchone()
        assert row is not None
        run = Run(**row)
        # The asking bullet names its run, so a page opened later can follow it.
        commands.set_props(bound, node.id, {"run": str(run.id)})
        record_step(conn, run, "status", "queued", {"status": "queued"})
        conn.execute("select pg_notify(%s, %s)", (CHANNEL, str(run.id)))
        return run


def _questions_page(cx: Context, conn: Conn) -> UUID:
    """The workspace's "Questions" page, created by the first question that needs it: two
    asks at once wait for each other here, so the second finds the page the first made."""
    conn.execute(
        "select pg_advisory_xact_lock(hashtextextended(%s, 0))",
        (f"questions-page:{cx.actor.workspace_id}",),
    )
    row = conn.execute(
        "select p.id from kb.pages p join kb.knowledge_bases k "
        "on k.workspace_id = p.workspace_id and k.id = p.kb_id and k.is_default "
        "where p.workspace_id = %s and p.title = %s and p.deleted_at is null "
        "and p.archived_at is null order by p.created_at limit 1",
        (cx.actor.workspace_id, QUESTIONS_PAGE),
    ).fetchone()
    if row is not None:
        return cast(UUID, row["id"])
    return commands.create_page(cx, QUESTIONS_PAGE).id


# -- reading runs ----------------------------------------------------------------------------


def get_run(conn: Conn, workspace_id: UUID, run_id: UUID) -> Run:
    row = conn.execute(
        f"select {RUN_COLUMNS} from kb.runs where workspace_id = %s and id = %s",
        (workspace_id, run_id),
    ).fetchone()
    if row is None:
        raise NotFound("run", run_id)
    return Run(**row)


def list_steps(conn: Conn, workspace_id: UUID, run_id: UUID, *, after: int = 0) -> list[Step]:
    rows = conn.execute(
        "select seq, kind, summary, data, at from kb.run_steps "
        "where workspace_id = %s and run_id = %s and seq > %s order by seq",
        (workspace_id, run_id, after),
    ).fetchall()
    return [Step(**row) for row in rows]


def answer_of(steps: list[Step]) -> list[dict[str, Any]]:
    """The answer bullets a run wrote, in order: [{id, text, refs}]."""
    return [dict(step.data) for step in steps if step.kind == "bullet"]


def is_last(step: Step) -> bool:
    """Whether the step ends the run's stream."""
    return step.kind == "status" and step.data.get("status") in FINISHED


def record_step(conn: Conn, run: Run, kind: str, summary: str, data: dict[str, Any]) -> int:
    """Append a step and wake the streams; returns its seq. One process writes a run's steps
    at a time (its executor, under the run's lock), so max + 1 does not race."""
    row = conn.execute(
        "insert into kb.run_steps (workspace_id, run_id, seq, kind, summary, data) "
        "select %s, %s, coalesce(max(seq), 0) + 1, %s, %s, %s from kb.run_steps "
        "where workspace_id = %s and run_id = %s returning seq",
        (
            run.workspace_id,
            run.id,
            kind,
            summary[:500],
            json.dumps(data, default=str),
            run.workspace_id,
            run.id,
        ),
    ).fetchone()
    assert row is not None
    conn.execute("select pg_notify(%s, %s)", (STEPS_CHANNEL, str(run.id)))
    return int(row["seq"])


@retried
def request_cancel(cx: Context, run_id: UUID) -> tuple[Run, bool]:
    """Ask the run to stop; returns the run and whether it was still going. A queued run is
    cancelled at once; a running one stops at its next step or bullet."""
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        run = get_run(conn, ws, run_id)
        if run.finished:
            return run, False
        row = conn.execute(
            "update kb.runs set cancel_requested = true, status = case when status = 'queued' "
            "then 'cancelled' else status end, finished_at = case when status = 'queued' "
            f"then now() else finished_at end where workspace_id = %s and id = %s "
            f"returning {RUN_COLUMNS}",
            (ws, run_id),
        ).fetchone()
        assert row is not None
        run = Run(**row)
        if run.status == "cancelled":
            record_step(conn, run, "status", "cancelled", {"status": "cancelled", "found": None})
        else:
            conn.execute("select pg_notify(%s, %s)", (STEPS_CHANNEL, str(run.id)))
        return run, True


def server_running(conn: Conn) -> bool:
    """Whether a `subspace serve` holds the database (its shared server lock)."""
    row = conn.execute("select pg_try_advisory_lock(%s) as free", (SERVER_LOCK_KEY,)).fetchone()
    assert row is not None
    if row["free"]:
        conn.execute("select pg_advisory_unlock(%s)", (SERVER_LOCK_KEY,))
    return not row["free"]


def tail_steps(
    db: Database, workspace_id: UUID, run_id: UUID, *, after: int = 0, poll_s: float = 0.2
) -> Iterator[Step]:
    """Yield the run's steps as they are written, until its last one."""
    while True:
        with db.pool.connection() as conn:
            steps = list_steps(conn, workspace_id, run_id, after=after)
        for step in steps:
            yield step
            after = step.seq
            if is_last(step):
                return
        time.sleep(poll_s)
