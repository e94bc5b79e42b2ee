"""The background work of a server, started and stopped in one place: the extraction workers,
the embeddings indexer, the lexical index's follower, the run worker, the sources' sync, and
the waker of the runs' event streams. An app served in this process (tests, `create_app` with
a database) runs all of it in its lifespan; `subspace serve` runs it in a background process
of its own (processes.py, `run_elected`), each web process only its step waker; `subspace
indexer` runs the two indexers alone.

Each is a `loop.Loop`: it wakes on its LISTEN channel (extraction on the outbox's, which an
upload writes to, or its poll), backs off on its own errors, and stops when asked; here each
runs in a daemon thread of its own, joined on stop.

Several servers may share one database (several hosts, each with its own lexical index):
each follows the outbox into its own index, and one of them, elected by an advisory lock,
runs the work done once for all (`run_elected`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from subspace.answers.runs import RunEngine, RunWorker
from subspace.answers.step_waker import StepWaker
from subspace.config import Settings
from subspace.database import Database
from subspace.db.locks import BACKGROUND_LOCK_KEY
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.ingest.worker import ExtractionWorker
from subspace.loop import Loop
from subspace.providers.base import EmbeddingProvider
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.sources.runner import SourcesLoop

log = logging.getLogger(__name__)

JOIN_S = 10.0  # how long a stop waits for each loop's thread
# How often a process waiting to be elected tries the lock, and how often the elected one
# checks that its lock connection lives: the work is taken over within about this long of
# the elected process's death.
ELECTION_POLL_S = 1.0


@dataclass
class Background:
    """The loops and workers running for one database; `stop()` stops them all: the loops
    (the run worker first, so no new answer starts), then the step waker, then the
    extraction workers."""

    loops: dict[str, Loop] = field(default_factory=dict)
    threads: dict[str, threading.Thread] = field(default_factory=dict)
    extractor: ExtractionWorker | None = None
    step_waker: StepWaker | None = None

    def start_loop(self, name: str, loop: Loop) -> None:
        thread = threading.Thread(target=loop.run, name=name, daemon=True)
        self.loops[name], self.threads[name] = loop, thread
        thread.start()

    def stop(self) -> None:
        """Stop everything; one stop that fails is logged and the others still run, so no
        worker outlives the database it works on."""
        stops: list[tuple[str, Callable[[], None]]] = [
            (name, loop.stop) for name, loop in self.loops.items()
        ]
        if self.step_waker is not None:
            stops.append(("step waker", self.step_waker.stop))
        if self.extractor is not None:
            stops.append(("extraction workers", self.extractor.stop))
        for name, stop in stops:
            try:
                stop()
            except Exception:
                log.exception("stopping the %s failed; stopping the rest", name)
        for thread in self.threads.values():
            thread.join(timeout=JOIN_S)


def start_indexing(db: Database, settings: Settings, provider: EmbeddingProvider) -> Background:
    """The embeddings indexer and the lexical follower (`subspace indexer`)."""
    background = Background()
    _start_indexers(background, db, settings, provider)
    return background


def _start_indexers(
    background: Background, db: Database, settings: Settings, provider: EmbeddingProvider
) -> None:
    background.start_loop("indexer", EmbeddingsFollower(db, settings, provider))
    background.start_loop("lexical-follower", LexicalFollower(db, settings))


def start_serving(
    db: Database,
    settings: Settings,
    provider: EmbeddingProvider,
    run_engine_options: Mapping[str, Any] | None = None,
) -> Background:
    """Everything a server runs beside its requests, in this process (an app served in the
    process that opened its database)."""
    background = start_elected(db, settings, provider, run_engine_options)
    background.start_loop("lexical-follower", LexicalFollower(db, settings))
    background.step_waker = StepWaker(db.dsn)
    background.step_waker.start()
    return background


def start_elected(
    db: Database,
    settings: Settings,
    provider: EmbeddingProvider,
    run_engine_options: Mapping[str, Any] | None = None,
) -> Background:
    """The work done once for every server of the database: extraction, the run worker, the
    embeddings indexer and the sources' sync."""
    extractor = ExtractionWorker(db, settings)
    background = Background(extractor=extractor)
    extractor.start()
    engine = RunEngine(db, settings, provider, **(run_engine_options or {}))
    background.start_loop("runs", RunWorker(engine, settings.max_runs))  # stops first
    background.start_loop("indexer", EmbeddingsFollower(db, settings, provider))
    background.start_loop("sources", SourcesLoop(db, settings))
    return background


def run_elected(
    db: Database, settings: Settings, provider: EmbeddingProvider, stop: threading.Event
) -> None:
    """The background process of `subspace serve`, until `stop` is set: it follows the outbox
    into this host's lexical index, and runs `start_elected`'s work while it holds
    BACKGROUND_LOCK_KEY. The lock lives with its connection: when the elected process dies,
    Postgres releases it and a waiting process takes the work over within ELECTION_POLL_S."""
    follower = Background()
    follower.start_loop("lexical-follower", LexicalFollower(db, settings))
    try:
        while not stop.is_set():
            try:
                _serve_while_elected(db, settings, provider, stop)
            except psycopg.Error as exc:
                log.warning("lost the election's connection (%s); standing again", exc)
            stop.wait(ELECTION_POLL_S)
    finally:
        follower.stop()


def _serve_while_elected(
    db: Database, settings: Settings, provider: EmbeddingProvider, stop: threading.Event
) -> None:
    with psycopg.connect(db.dsn, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute("select pg_try_advisory_lock(%s)", (BACKGROUND_LOCK_KEY,)).fetchone()
            if row is not None and row[0]:
                break
            stop.wait(ELECTION_POLL_S)
        else:
            return
        log.info("elected to run the background work (process %d)", os.getpid())
        work = start_elected(db, settings, provider)
        try:
            while not stop.wait(ELECTION_POLL_S):
                conn.execute("select 1")  # raises once the connection, and the lock, are gone
        finally:
            work.stop()
