"""The server's run worker (a loop that claims queued runs, a few at once, each in a thread of
its own) and the reaper: a 'running' run whose lock is free lost its process and is marked
failed."""

from __future__ import annotations

import logging
import threading
import time
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from subspace.answers.runs.engine import Claimed, Recorder, RunEngine
from subspace.answers.runs.queue import CHANNEL, STOPPED, get_run, record_step
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.locks import RUN_LOCK_CLASS
from subspace.errors import SubspaceError
from subspace.loop import Loop
from subspace.models import Actor

log = logging.getLogger(__name__)

REAP_EVERY_S = 60.0  # how often a worker looks for runs whose process died

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
