"""Execute a queued run and SIGKILL the process after its first answer bullet:
`python -m tests.runs_crash DSN RUN_ID`."""

from __future__ import annotations

import os
import signal
import sys
from uuid import UUID

from subspace.answers import runs
from subspace.answers.runs import engine as engine_module
from subspace.answers.strategy import AnswerBullet
from subspace.config import Settings
from subspace.database import Database
from subspace.db.pool import open_pool
from tests.answers.test_runs import Quoting


class Dying(runs.Recorder):
    def bullet(self, bullet: AnswerBullet) -> None:
        super().bullet(bullet)
        os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    dsn, run_id = sys.argv[1], UUID(sys.argv[2])
    db = Database(dsn=dsn, pool=open_pool(dsn, max_size=2), embedded=None)
    settings = Settings(database_url=dsn, providers="fake")
    engine_module.Recorder = Dying  # type: ignore[misc]  # as the engine finds it
    engine = runs.RunEngine(db, settings, None, {"rag": Quoting()})
    claimed = engine.claim(run_id)
    assert claimed is not None, "the run was not queued"
    engine.execute(claimed)
    raise SystemExit("the run was expected to die")


if __name__ == "__main__":
    main()
