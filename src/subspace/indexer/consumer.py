"""The outbox consumer that keeps the vector leg current.

Events only say which page, file or mail changed; the indexer then reads the item's current
state and reconciles its embeddings. So an event delivered twice, or late, or out of order,
is harmless: the second pass finds nothing to do. Events are acknowledged (marked indexed)
only after the embeddings they caused have committed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg

from subspace.commands.outbox import CHANNEL
from subspace.config import Settings
from subspace.db.notifications import Listener
from subspace.db.pool import Conn
from subspace.indexer.desired import IndexTarget
from subspace.indexer.reconcile import Outcome, reconcile
from subspace.indexer.sweep import stale_targets
from subspace.providers.base import EmbeddingProvider
from subspace.providers.registry import index_debounce_ms
from subspace.runtime import Database
from subspace.search import registry

log = logging.getLogger(__name__)

FETCH_LIMIT = 2_000  # events read per round
TARGETS_PER_TRANSACTION = 200  # bounds how long one transaction holds its locks
POLL_SECONDS = 2.0  # also polled, in case a notification is missed
RETRY_BASE_S = 1.0
RETRY_MAX_S = 300.0


@dataclass
class Pending:
    """The unacknowledged events of one target."""

    event_ids: list[int] = field(default_factory=list)
    oldest_age_ms: float = 0.0
    newest_age_ms: float = float("inf")
    attempts: int = 0


@dataclass
class Round:
    """What one round of the consumer did."""

    events: int = 0
    acked: int = 0
    outcome: Outcome = field(default_factory=Outcome)
    failed: int = 0
    next_due_s: float | None = None


def event_target(workspace_id: UUID, event: str, payload: dict[str, Any]) -> IndexTarget | None:
    """The page, file or mail an outbox event changed; None for an event about none."""
    found = registry.item_of_event(event, payload)
    return None if found is None else IndexTarget(workspace_id, *found)


class Indexer:
    """Consumes the outbox. `run_once` does one round; `run` loops until stopped.

    `on_committed` is called after embeddings commit and before their events are acked (a
    seam for metrics and for crash tests).
    """

    def __init__(
        self,
        db: Database,
        settings: Settings,
        provider: EmbeddingProvider,
        *,
        on_committed: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.provider = provider
        self.debounce_ms = index_debounce_ms(settings, provider)
        self.on_committed = on_committed
        self._stop = threading.Event()
        self._wake = threading.Event()

    # -- one round ---------------------------------------------------------------------------

    def run_once(self, *, ignore_debounce: bool = False) -> Round:
        """Reconcile every target whose events are due; return what was done."""
        result = Round()
        with self.db.pool.connection() as conn:
            rows = conn.execute(
                "select id, workspace_id, event, payload, attempts, "
                "extract(epoch from now() - created_at) * 1000 as age_ms from kb.outbox "
                "where indexed_at is null and (retry_at is null or retry_at <= now()) "
                "order by id limit %s",
                (FETCH_LIMIT,),
            ).fetchall()
        result.events = len(rows)
        pending: dict[IndexTarget, Pending] = defaultdict(Pending)
        nothing_to_embed: list[int] = []
        for row in rows:
            target = event_target(row["workspace_id"], row["event"], row["payload"])
            if target is None:
                nothing_to_embed.append(row["id"])
                continue
            entry = pending[target]
            entry.event_ids.append(row["id"])
            entry.oldest_age_ms = max(entry.oldest_age_ms, float(row["age_ms"]))
            entry.newest_age_ms = min(entry.newest_age_ms, float(row["age_ms"]))
            entry.attempts = max(entry.attempts, row["attempts"])
        result.acked += self._ack(nothing_to_embed)

        due: list[IndexTarget] = []
        for target, entry in pending.items():
            wait_ms = self._wait_ms(target, entry)
            if ignore_debounce or wait_ms <= 0:
                due.append(target)
            else:
                wait_s = wait_ms / 1000
                result.next_due_s = min(result.next_due_s or wait_s, wait_s)
        due.sort()
        for start in range(0, len(due), TARGETS_PER_TRANSACTION):
            self._process(due[start : start + TARGETS_PER_TRANSACTION], pending, result)
        return result

    def _wait_ms(self, target: IndexTarget, entry: Pending) -> float:
        """How long the target should still wait: pages coalesce a burst of edits."""
        if target.kind != "page" or entry.attempts > 0:
            return 0.0
        quiet = self.debounce_ms - entry.newest_age_ms
        overdue = self.settings.index_max_wait_ms - entry.oldest_age_ms
        return min(quiet, overdue)

    def _process(
        self, targets: list[IndexTarget], pending: dict[IndexTarget, Pending], result: Round
    ) -> None:
        try:
            outcome = self._reconcile(targets)
        except psycopg.OperationalError:
            raise  # the database is away: nothing is wrong with these events
        except Exception as exc:  # a provider error, or any bug a strange item triggers
            if len(targets) == 1:
                result.failed += self._fail(targets[0], pending[targets[0]], exc)
                return
            # Find the target that fails, so one bad text cannot hold back the others.
            for target in targets:
                self._process([target], pending, result)
            return
        result.outcome.add(outcome)
        if self.on_committed is not None:
            self.on_committed(outcome)
        acked = [i for t in outcome.done for i in pending[t].event_ids]
        result.acked += self._ack(acked)

    def _reconcile(self, targets: list[IndexTarget]) -> Outcome:
        with self.db.pool.connection() as conn, conn.transaction():
            return reconcile(conn, self.provider, targets, batch_size=self.settings.embed_batch)

    def _ack(self, event_ids: list[int]) -> int:
        if not event_ids:
            return 0
        with self.db.pool.connection() as conn:
            cur = conn.execute(
                "update kb.outbox set indexed_at = now() where id = any(%s) and indexed_at is null",
                (event_ids,),
            )
        return cur.rowcount

    def _fail(self, target: IndexTarget, entry: Pending, error: Exception) -> int:
        """Count a failure on the target's events: retry later, or set them aside."""
        attempts = entry.attempts + 1
        message = str(error)
        log.warning(
            "indexing %s %s failed (attempt %d): %s", target.kind, target.item_id, attempts, message
        )
        with self.db.pool.connection() as conn, conn.transaction():
            if attempts >= self.settings.index_max_attempts:
                _dead_letter(conn, entry.event_ids, message, attempts)
                return len(entry.event_ids)
            delay = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** (attempts - 1))
            conn.execute(
                "update kb.outbox set attempts = %s, last_error = %s, "
                "retry_at = now() + make_interval(secs => %s) where id = any(%s)",
                (attempts, message, delay, entry.event_ids),
            )
        return len(entry.event_ids)

    # -- draining and looping ----------------------------------------------------------------

    def drain(self, *, timeout_s: float = 60.0) -> Outcome:
        """Process rounds, ignoring the debounce, until nothing is due; for imports and tests."""
        total = Outcome()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = self.run_once(ignore_debounce=True)
            total.add(done.outcome)
            if done.events == 0 or (done.acked == 0 and done.failed == 0):
                break
        return total

    def sweep(self) -> Outcome:
        """Reconcile everything that differs from what should be embedded (crash healing)."""
        with self.db.pool.connection() as conn:
            targets = stale_targets(conn, self.provider.model)
        total = Outcome()
        for start in range(0, len(targets), TARGETS_PER_TRANSACTION):
            total.add(self._reconcile(targets[start : start + TARGETS_PER_TRANSACTION]))
        if targets:
            log.info("sweep reconciled %d stale items", len(targets))
        return total

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def run(self) -> None:
        """Consume until `stop()`: wake on NOTIFY, on a due debounce, or every few seconds."""
        listener = Listener(self.db.dsn, CHANNEL, lambda _: self._wake.set(), name="indexer-listen")
        listener.start()
        last_sweep = time.monotonic()
        while not self._stop.is_set():
            wait = POLL_SECONDS
            try:
                done = self.run_once()
                if done.next_due_s is not None:
                    wait = min(wait, max(0.05, done.next_due_s))
                sweep_every = self.settings.index_sweep_s
                if sweep_every and time.monotonic() - last_sweep >= sweep_every:
                    self.sweep()
                    last_sweep = time.monotonic()
            except Exception:  # keep consuming through a database or provider hiccup
                log.exception("indexer round failed; retrying")
            self._wake.wait(wait)
            self._wake.clear()
        listener.stop()  # its connection closes before the database goes away


def _dead_letter(conn: Conn, event_ids: list[int], error: str, attempts: int) -> None:
    conn.execute(
        "insert into search.dead_letters (workspace_id, event_id, event, payload, error, attempts) "
        "select workspace_id, id, event, payload, %s, %s from kb.outbox where id = any(%s) "
        "on conflict do nothing",
        (error, attempts, event_ids),
    )
    conn.execute(
        "update kb.outbox set indexed_at = now(), attempts = %s, last_error = %s "
        "where id = any(%s)",
        (attempts, error, event_ids),
    )
    log.error("set aside %d events after %d failed attempts: %s", len(event_ids), attempts, error)
