"""Answer runs: filing a question, executing it with a strategy, and recording every step.

A run is a row of kb.runs and the bullet that asked it ("/rag <question>"). Whoever executes
it (the server's RunWorker, or `subspace ask` without a server) holds an advisory lock on the
run for as long as it works, writes each step to kb.run_steps and each answer bullet as a child
of the asking bullet through commands.add_node. Streams read the steps, so any process can
stream any run. A 'running' run whose lock is free lost its process: it is marked failed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, cast
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from subspace import commands
from subspace.answers.answerer import create_chat_provider
from subspace.answers.sources import run_bullets
from subspace.answers.strategies import STRATEGIES
from subspace.answers.strategy import AnswerBullet, Job, Strategy
from subspace.answers.strategy_names import NAMES as STRATEGY_NAMES
from subspace.commands.retry import retried
from subspace.config import Settings
from subspace.context import Context
from subspace.db import queries
from subspace.db.locks import RUN_LOCK_CLASS, SERVER_LOCK_KEY
from subspace.db.pool import Conn
from subspace.errors import Conflict, InvalidInput, NotFound, SubspaceError
from subspace.loop import Loop
from subspace.models import Actor
from subspace.providers.base import EmbeddingProvider
from subspace.providers.chat import Cancelled, ChatError, ChatProvider
from subspace.runtime import Database
from subspace.text import is_clean

log = logging.getLogger(__name__)

CHANNEL = "subspace_runs"  # a run was queued: wakes the workers
STEPS_CHANNEL = "subspace_run_steps"  # a run wrote a step: wakes its streams
MAX_QUESTION_CHARS = 2_000  # as long as a search query may be
QUESTIONS_PAGE = "Questions"  # where a question asked with no page or bullet is filed
REAP_EVERY_S = 60.0  # how often a worker looks for runs whose process died
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


# -- executing -------------------------------------------------------------------------------


class Stopping(Exception):
    """The process executing the run is shutting down."""


def default_strategies() -> Mapping[str, Strategy]:
    """The answering strategies by name (tests run their own)."""
    return STRATEGIES


@dataclass
class Claimed:
    """A run this process executes, and the connection holding the run's lock."""

    run: Run
    lock: psycopg.Connection[dict[str, Any]]


class Recorder:
    """The Progress a strategy reports to: each step and bullet is written as it comes."""

    def __init__(self, engine: RunEngine, run: Run, cx: Context) -> None:
        self.engine = engine
        self.run = run
        self.cx = cx
        self.written: list[AnswerBullet] = []  # handed over by the strategy
        self.wrote = 0  # answer bullets written

    def _check(self) -> None:
        if self.engine.stopping.is_set():
            raise Stopping
        if self.cancelled():
            raise Cancelled

    def step(self, kind: str, summary: str, data: dict[str, Any]) -> None:
        self._check()
        kind = kind if kind in ("tool", "error") else "tool"
        with self.cx.transaction() as conn:
            record_step(conn, self.run, kind, summary, data)

    def bullet(self, bullet: AnswerBullet) -> None:
        self._check()
        self.written.append(bullet)
        refs = self._evidence(bullet.refs)
        if bullet.refs and not refs:
            return  # it only cited questions or earlier answers
        self.write(bullet.text, refs)

    def _evidence(self, refs: list[str]) -> list[str]:
        """The refs without the bullets runs asked with or wrote (answers/sources.py)."""
        with self.cx.transaction() as conn:
            not_sources = run_bullets(conn, self.run.workspace_id, refs)
        return [ref for ref in refs if ref not in not_sources]

    def write(self, text: str, refs: list[str]) -> None:
        """Write one answer bullet under the asking bullet, and its step."""
        props = {"refs": list(refs), "run": str(self.run.id)}

        def answer_bullet(bound: Context, conn: Conn) -> None:
            node = commands.add_node(
                bound, self.run.page_id, text, parent_id=self.run.node_id, props=props
            )
            data = {"id": str(node.id), "text": node.text, "refs": list(refs)}
            record_step(conn, self.run, "bullet", node.text, data)

        commands.unit_of_work(self.cx, answer_bullet)
        self.wrote += 1

    def cancelled(self) -> bool:
        with self.cx.transaction() as conn:
            row = conn.execute(
                "select cancel_requested from kb.runs where workspace_id = %s and id = %s",
                (self.run.workspace_id, self.run.id),
            ).fetchone()
        return row is None or bool(row["cancel_requested"])


# The queued run of the workspace with the fewest runs going, the oldest first.
_NEXT_RUN = f"""
select {RUN_COLUMNS} from kb.runs r
where r.status = 'queued' and (%s::uuid is null or r.id = %s)
order by (select count(*) from kb.runs going
          where going.workspace_id = r.workspace_id and going.status = 'running'),
         r.created_at
limit 1 for update skip locked
"""


@dataclass
class RunEngine:
    """Claims and executes runs: the same code in the server's worker and in the CLI."""

    db: Database
    settings: Settings
    provider: EmbeddingProvider | None  # the embeddings the run's searches use
    strategies: Mapping[str, Strategy] = field(default_factory=default_strategies)
    chat: Callable[[Settings], ChatProvider] = create_chat_provider
    stopping: threading.Event = field(default_factory=threading.Event)

    def claim(self, run_id: UUID | None = None) -> Claimed | None:
        """Take the next queued run (or `run_id`), lock it and mark it running: the oldest of
        the workspaces running the fewest, so a workspace that queued many questions at once
        takes turns with the others instead of making them wait for all of its own."""
        with self.db.pool.connection() as conn:  # cheap, before a connection of its own
            if (
                conn.execute("select 1 from kb.runs where status = 'queued' limit 1").fetchone()
                is None
            ):
                return None
        lock = psycopg.connect(self.db.dsn, autocommit=True, row_factory=dict_row)
        try:
            with lock.transaction():
                row = lock.execute(_NEXT_RUN, (run_id, run_id)).fetchone()
                if row is None:
                    lock.close()
                    return None
                run = Run(**row)
                # Taken before the claim commits, so no sweep sees it running and unlocked.
                lock.execute(
                    "select pg_advisory_lock(%s, hashtext(%s))", (RUN_LOCK_CLASS, str(run.id))
                )
                lock.execute(
                    "update kb.runs set status = 'running', started_at = now() "
                    "where workspace_id = %s and id = %s",
                    (run.workspace_id, run.id),
                )
                run.status = "running"
                record_step(lock, run, "status", "running", {"status": "running"})
        except BaseException:
            lock.close()
            raise
        return Claimed(run, lock)

    def execute(self, claimed: Claimed) -> Run:
        """Answer the run; returns it finished (done, failed or cancelled)."""
        run = claimed.run
        cx = Context(
            db=self.db.request_pool,
            actor=Actor(run.workspace_id, run.user_id),
            settings=self.settings,
            connection_shares=self.db.connection_shares,
            parsers=self.db.parsers,
        )
        recorder = Recorder(self, run, cx)
        try:
            strategy = self.strategies.get(run.strategy)
            if strategy is None:
                raise ChatError(
                    f"The {run.strategy} strategy is not available in this version. "
                    f"Ask with one of: {', '.join(sorted(self.strategies)) or 'none'}."
                )
            recorder._check()
            job = Job(
                cx,
                self.db.searcher(self.provider),
                self.chat(self.settings),
                run.question,
                self.settings,
                recorder,
            )
            answer = strategy.answer(job)
            # Bullets the strategy returned without streaming them are written now, in order.
            streamed = list(recorder.written)
            for bullet in answer.bullets:
                if bullet in streamed:
                    streamed.remove(bullet)
                else:
                    recorder.bullet(bullet)
            if not recorder.wrote:
                # Every bullet quoted only questions: nothing in the workspace answered.
                recorder.write(f"I found nothing about {run.question}.", [])
                return self._finish(run, "done", found=False)
            return self._finish(run, "done", found=answer.found)
        except Cancelled:
            return self._finish(run, "cancelled")
        except Stopping:
            return self._fail(recorder, STOPPED, STOPPED)
        except (ChatError, SubspaceError) as exc:
            return self._fail(recorder, f"The answer stopped: {exc.message}", exc.message)
        except Exception:
            log.exception("run %s failed", run.id)
            message = "an internal error stopped the answer (see the server log)"
            return self._fail(
                recorder, "The answer stopped: an internal error (see the server log).", message
            )
        finally:
            claimed.lock.close()  # releases the run's lock

    def _fail(self, recorder: Recorder, text: str, error: str) -> Run:
        try:
            recorder.write(text, [])
        except SubspaceError as exc:  # the asking bullet or its page is gone
            log.warning("run %s: could not write why it stopped: %s", recorder.run.id, exc)
        return self._finish(recorder.run, "failed", error=error)

    def _finish(
        self, run: Run, status: Status, *, found: bool | None = None, error: str | None = None
    ) -> Run:
        with self.db.pool.connection() as conn, conn.transaction():
            row = conn.execute(
                f"update kb.runs set status = %s, found = %s, error = %s, finished_at = now() "
                f"where workspace_id = %s and id = %s returning {RUN_COLUMNS}",
                (status, found, error, run.workspace_id, run.id),
            ).fetchone()
            assert row is not None
            data = {"status": status, "found": found, "error": error}
            record_step(conn, run, "status", status, data)
            return Run(**row)


def reap_stopped(db: Database, settings: Settings) -> list[UUID]:
    """Mark failed every 'running' run whose process died (its lock is free), with a last
    bullet saying so; returns their ids. Safe to run from any number of processes."""
    reaped: list[UUID] = []
    with psycopg.connect(db.dsn, autocommit=True, row_factory=dict_row) as conn:
        rows = conn.execute(
            "select workspace_id, id from kb.runs where status = 'running'"
        ).fetchall()
        for row in rows:
            key = (RUN_LOCK_CLASS, str(row["id"]))
            got = conn.execute("select pg_try_advisory_lock(%s, hashtext(%s)) as got", key)
            if not got.fetchone()["got"]:  # type: ignore[index]
                continue
            try:
                with conn.transaction():
                    run = get_run(conn, row["workspace_id"], row["id"])
                    if run.status != "running":
                        continue
                    cx = Context(
                        db=conn,
                        actor=Actor(run.workspace_id, run.user_id),
                        settings=settings,
                    )
                    try:
                        Recorder(RunEngine(db, settings, None, {}), run, cx).write(STOPPED, [])
                    except SubspaceError as exc:
                        log.warning("run %s: could not write why it stopped: %s", run.id, exc)
                    conn.execute(
                        "update kb.runs set status = 'failed', error = %s, finished_at = now() "
                        "where workspace_id = %s and id = %s",
                        (STOPPED, run.workspace_id, run.id),
                    )
                    record_step(
                        conn,
                        run,
                        "status",
                        "failed",
                        {"status": "failed", "found": None, "error": STOPPED},
                    )
                    reaped.append(run.id)
            finally:
                conn.execute("select pg_advisory_unlock(%s, hashtext(%s))", key)
    if reaped:
        log.warning("marked %d runs failed: the process running them stopped", len(reaped))
    return reaped


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


# -- the server's worker ---------------------------------------------------------------------


class RunWorker(Loop):
    """Executes queued runs, at most `max_runs` at once, each in a thread of its own; wakes
    on NOTIFY and every few seconds, and sweeps runs whose process died every minute."""

    name = "runs"

    def __init__(self, engine: RunEngine, max_runs: int) -> None:
        super().__init__(engine.db.dsn, CHANNEL)
        self.engine = engine
        self.max_runs = max(1, max_runs)
        self._active: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._last_reap = 0.0

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop claiming; runs in progress stop at their next step, marked failed."""
        super().stop()
        self.engine.stopping.set()
        deadline = time.monotonic() + timeout_s
        for thread in list(self._active):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def round(self) -> None:
        """Reap the runs of dead processes when due, then start queued runs while a slot is
        free."""
        if time.monotonic() - self._last_reap >= REAP_EVERY_S:
            reap_stopped(self.engine.db, self.engine.settings)
            self._last_reap = time.monotonic()
        while len(self._active) < self.max_runs and not self.stopping:
            claimed = self.engine.claim()
            if claimed is None:
                break
            self._start(claimed)

    def _start(self, claimed: Claimed) -> None:
        def work() -> None:
            try:
                self.engine.execute(claimed)
            finally:
                with self._lock:
                    self._active.discard(threading.current_thread())
                self.wake()

        thread = threading.Thread(target=work, name=f"run-{claimed.run.id}", daemon=True)
        with self._lock:
            self._active.add(thread)
        thread.start()
