"""Run the lexical follower and SIGKILL it at a chosen point of a commit:
`python -m tests.lexical_crash DSN HOME MODE`.

MODE is `mid-commit` (one source's index committed, the others and the position not) or
`before-position` (every index committed, the position not recorded).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from subspace.config import Settings
from subspace.database import Database
from subspace.db.pool import open_pool
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.lexical.index.layout import State
from subspace.search.lexical.index.writer import Writers


def die(*_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class DyingWriter:
    """A Tantivy writer whose first commit completes and then kills the process."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def commit(self) -> int:
        committed = int(self._writer.commit())
        die()
        return committed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


def main() -> None:
    dsn, home, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    db = Database(dsn=dsn, pool=open_pool(dsn, max_size=2), embedded=None)
    settings = Settings(home=home, database_url=dsn, providers="fake")
    follower = LexicalFollower(db, settings)
    opened = follower.open()  # the index the test built, its writes not applied yet
    assert opened is not None
    assert not opened.rebuilt
    if mode == "mid-commit":
        writer_of = Writers.open_writer
        Writers.open_writer = staticmethod(lambda index: DyingWriter(writer_of(index)))  # type: ignore[method-assign, assignment]
    else:
        State.write = die  # type: ignore[method-assign, assignment]
    follower.run_once()
    raise SystemExit("the follower was expected to die")


if __name__ == "__main__":
    main()
