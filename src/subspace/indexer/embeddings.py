"""The embeddings follower that keeps the vector leg current.

Each round takes what the outbox says changed since its position into the embedding queue
(indexer/queue.py), then reconciles the items that are due: it reads each item's current
state and makes its embeddings match. So an event read twice, or late, or out of order, is
harmless: the second pass finds nothing to do. An item leaves the queue only after the
embeddings it caused have committed.

A round gives each workspace with due items one transaction of at most `embed_batch` new
texts, so a bulk import in one workspace delays another's new bullet by one such transaction.
The sweep (at start, then every `index_sweep_s`) queues whatever lacks vectors of the active
model, which after a change of model is everything: the healing runs through the same rounds,
after the items people change, and when it is complete the other models' vectors are dropped
(unless SUBSPACE_INDEX_KEEP_OTHER_MODELS).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

import psycopg

from subspace.config import Settings
from subspace.database import Database
from subspace.db.vector_index import forget_unused_models
from subspace.indexer import queue
from subspace.indexer.desired import IndexTarget
from subspace.indexer.queue import Queued
from subspace.indexer.reconcile import Outcome, reconcile
from subspace.indexer.sweep import drop_other_models, queue_stale
from subspace.loop import Loop
from subspace.outbox.append import CHANNEL
from subspace.providers.base import EmbeddingProvider
from subspace.providers.registry import index_debounce_ms

log = logging.getLogger(__name__)

FETCH_LIMIT = 2_000  # queued items read per round
TARGETS_PER_TRANSACTION = 200  # bounds how long one transaction holds its locks
RETRY_BASE_S = 1.0
RETRY_MAX_S = 300.0


@dataclass
class Round:
    """What one round of the follower did."""

    taken: int = 0  # queue entries the outbox's new events added or joined
    due: int = 0  # items read from the queue
    done: int = 0  # items whose embeddings committed and that left the queue
    outcome: Outcome = field(default_factory=Outcome)
    failed: int = 0
    next_due_s: float | None = None
    more: bool = False  # due items were left for the next round


class EmbeddingsFollower(Loop):
    """Follows the outbox into the embeddings. `run_once` does one round; `run` loops until
    stopped, sweeping every `index_sweep_s`.

    `on_committed` is called after embeddings commit and before their items leave the queue
    (a seam for metrics and for crash tests).
    """

    name = "indexer"

    def __init__(
        self,
        db: Database,
        settings: Settings,
        provider: EmbeddingProvider,
        *,
        on_committed: Callable[[Outcome], None] | None = None,
    ) -> None:
        super().__init__(db.dsn, CHANNEL)
        self.db = db
        self.settings = settings
        self.provider = provider
        self.debounce_ms = index_debounce_ms(settings, provider)
        self.on_committed = on_committed
        self._last_sweep: float | None = None  # the first round sweeps
        self._healing = False

    # -- one round ---------------------------------------------------------------------------

    def run_once(self, *, ignore_debounce: bool = False) -> Round:
        """Take the new events, then reconcile every queued item that is due."""
        result = Round()
        with self.db.pool.connection() as conn:
            result.taken = queue.take_new(conn)
            entries = queue.due(conn, FETCH_LIMIT)
        result.due = len(entries)
        due: list[Queued] = []
        for entry in entries:
            wait_ms = self._wait_ms(entry)
            if ignore_debounce or wait_ms <= 0:
                due.append(entry)
            else:
                wait_s = wait_ms / 1000
                result.next_due_s = min(result.next_due_s or wait_s, wait_s)
        # One transaction a workspace, in the queue's order (the workspaces in turn).
        by_workspace: dict[UUID, list[Queued]] = {}
        for entry in due:
            by_workspace.setdefault(entry.target.workspace_id, []).append(entry)
        for turn in by_workspace.values():
            self._process(turn[:TARGETS_PER_TRANSACTION], result)
        result.more = result.done < len(due) and bool(result.outcome.embedded or result.done)
        if result.more:
            result.next_due_s = 0.0
        return result

    def _wait_ms(self, entry: Queued) -> float:
        """How long the item should still wait: pages coalesce a burst of edits."""
        if entry.target.kind != "page" or entry.attempts > 0:
            return 0.0
        quiet = self.debounce_ms - entry.newest_age_ms
        overdue = self.settings.index_max_wait_ms - entry.oldest_age_ms
        return min(quiet, overdue)

    def _process(self, entries: list[Queued], result: Round) -> None:
        try:
            outcome = self._reconcile([entry.target for entry in entries])
        except psycopg.OperationalError:
            raise  # the database is away: nothing is wrong with these items
        except Exception as exc:  # a provider error, or any bug a strange item triggers
            if len(entries) == 1:
                result.failed += self._fail(entries[0], exc)
                return
            # Find the item that fails, so one bad text cannot hold back the others.
            for entry in entries:
                self._process([entry], result)
            return
        result.outcome.add(outcome)
        if self.on_committed is not None:
            self.on_committed(outcome)
        done = set(outcome.done)
        with self.db.pool.connection() as conn:
            result.done += queue.embedded(conn, [e for e in entries if e.target in done])

    def _reconcile(self, targets: list[IndexTarget]) -> Outcome:
        batch = self.settings.embed_batch
        with self.db.pool.connection() as conn, conn.transaction():
            return reconcile(conn, self.provider, targets, batch_size=batch, budget=batch)

    def _fail(self, entry: Queued, error: Exception) -> int:
        """Count a failure on the item: retry later, or set it aside; returns its events."""
        attempts = entry.attempts + 1
        message = str(error)
        target = entry.target
        log.warning(
            "indexing %s %s failed (attempt %d): %s", target.kind, target.item_id, attempts, message
        )
        with self.db.pool.connection() as conn, conn.transaction():
            if attempts >= self.settings.index_max_attempts:
                queue.set_aside(conn, entry, message)
                log.error("set aside %s %s after %d failed attempts: %s",
                          target.kind, target.item_id, attempts, message)  # fmt: skip
            else:
                delay = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** (attempts - 1))
                queue.retry_later(conn, entry, message, delay)
        return entry.events

    # -- draining and looping ----------------------------------------------------------------

    def drain(self, *, timeout_s: float = 60.0) -> Outcome:
        """Process rounds, ignoring the debounce, until nothing is due; for imports and tests."""
        total = Outcome()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = self.run_once(ignore_debounce=True)
            total.add(done.outcome)
            if done.due == 0 or not (done.done or done.failed or done.outcome.embedded):
                break
        return total

    def heal(self) -> int:
        """Queue every item whose vectors under the active model are missing, outdated or
        orphaned; when there is none and none is still queued by an earlier heal, the active
        model is complete and the other models' vectors are dropped (unless kept). Returns how
        many items joined the queue."""
        model = self.provider.model
        with self.db.pool.connection() as conn, conn.transaction():
            queued = queue_stale(conn, model)
            healing = queue.healing(conn)
            if queued:
                log.info("queued %d items to embed with %s", queued, model)
            elif not healing and not self.settings.index_keep_other_models:
                dropped = drop_other_models(conn, model)
                if dropped:
                    forget_unused_models(conn)  # their indexes only cost writes now
                    log.info("dropped %d vectors of other models: %s is complete", dropped, model)
        self._healing = bool(queued or healing)
        return queued

    def sweep(self) -> Outcome:
        """Heal, and embed what that queued (crash healing, a new model) before returning."""
        self.heal()
        outcome = self.drain(timeout_s=float("inf"))
        if self._healing:
            self.heal()  # complete now: drop what the healed model replaced
        return outcome

    def round(self) -> float | None:
        """One round of `run`: the heal when it is due (at start, every `index_sweep_s`, and
        once a heal's items are all embedded), then the queue."""
        every = self.settings.index_sweep_s
        now = time.monotonic()
        if self._last_sweep is None or (every and now - self._last_sweep >= every):
            self.heal()
            self._last_sweep = now
        done = self.run_once()
        if self._healing and done.due == 0:
            self.heal()
        return done.next_due_s
