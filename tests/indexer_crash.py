"""Run the indexer and SIGKILL it at a chosen point: `python -m tests.indexer_crash DSN MODE`.

MODE is `after-embed` (the provider answered, nothing committed) or `after-commit`
(embeddings committed, events not yet acknowledged).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence

from subspace.config import Settings
from subspace.database import Database
from subspace.db.pool import open_pool
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.providers.base import EmbedResult
from subspace.providers.fake import FakeProvider


def die(*_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class DyingProvider(FakeProvider):
    def embed(self, texts: Sequence[str]) -> EmbedResult:
        super().embed(texts)
        die()
        raise AssertionError("unreachable")


def main() -> None:
    dsn, mode = sys.argv[1], sys.argv[2]
    db = Database(dsn=dsn, pool=open_pool(dsn, max_size=2), embedded=None)
    settings = Settings(database_url=dsn, providers="fake")
    if mode == "after-embed":
        EmbeddingsFollower(db, settings, DyingProvider()).drain()
    else:
        EmbeddingsFollower(db, settings, FakeProvider(), on_committed=die).drain()
    raise SystemExit("the indexer was expected to die")


if __name__ == "__main__":
    main()
