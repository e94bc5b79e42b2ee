"""The background work of a server, started and stopped in one place: the extraction workers,
the embeddings indexer, the lexical index's follower, the run worker, and the waker of the
runs' event streams. `subspace serve` runs all of it (api/app.py's lifespan), `subspace
indexer` the two indexers alone.

Each is a `loop.Loop`: it wakes on its LISTEN channel (extraction, which has none, on an
upload in this process or its poll), backs off on its own errors, and stops when asked;
here each runs in a daemon thread of its own, joined on stop.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from subspace.answers.runs import RunEngine, RunWorker
from subspace.answers.step_waker import StepWaker
from subspace.config import Settings
from subspace.database import Database
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.ingest.worker import ExtractionWorker
from subspace.loop import Loop
from subspace.providers.base import EmbeddingProvider
from subspace.search.lexical.index.follower import LexicalFollower

log = logging.getLogger(__name__)

JOIN_S = 10.0  # how long a stop waits for each loop's thread


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
    """Everything a server runs beside its requests (`subspace serve`)."""
    extractor, step_waker = ExtractionWorker(db, settings), StepWaker(db.dsn)
    background = Background(extractor=extractor, step_waker=step_waker)
    extractor.start()
    engine = RunEngine(db, settings, provider, **(run_engine_options or {}))
    background.start_loop("runs", RunWorker(engine, settings.max_runs))  # stops first
    _start_indexers(background, db, settings, provider)
    step_waker.start()
    return background
