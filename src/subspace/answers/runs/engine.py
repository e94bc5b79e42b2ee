"""Executing a run: the engine claims a queued run (an advisory lock held for as long as it
works), hands it to its strategy, and records each step and answer bullet as it comes. The same
code runs in the server's worker and in `subspace ask` without a server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from subspace import commands
from subspace.answers.answerer import create_chat_provider
from subspace.answers.runs.queue import RUN_COLUMNS, STOPPED, Run, Status, record_step
from subspace.answers.sources import run_bullets
from subspace.answers.strategies import STRATEGIES
from subspace.answers.strategy import AnswerBullet, Job, Strategy
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.locks import RUN_LOCK_CLASS
from subspace.db.pool import Conn
from subspace.errors import SubspaceError
from subspace.models import Actor
from subspace.providers.base import EmbeddingProvider
from subspace.providers.chat import Cancelled, ChatError, ChatProvider

log = logging.getLogger(__name__)

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
        cx = self.db.context(Actor(run.workspace_id, run.user_id), self.settings)
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
