"""What a file of random bytes costs to extract and store: its text is words no other chunk
holds, the worst case for the statistics and postings the chunks' triggers keep.

Starts a throwaway embedded Postgres in a temporary folder, uploads SIZE random bytes as a
text file, extracts it as the server's workers do, and prints the time of the whole and of
storing its chunks (`record_extraction`, one transaction).

    python bench/random_file.py [--mb 5]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace import commands
from subspace.config import Settings
from subspace.database import open_database
from subspace.db.embedded import start_embedded
from subspace.ingest import worker
from subspace.splitting import split_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=5.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="subspace-random-"))
    server = start_embedded(folder / "data")
    try:
        settings = Settings(database_url=server.dsn, home=folder / "home", providers="fake")
        db = open_database(settings)
        cx = db.default_context(settings)
        data = random.Random(5).randbytes(int(args.mb * 1_000_000))
        commands.upload_file(cx, "random.txt", data, content_type="text/plain")
        stored: dict[str, Any] = {}
        record = worker.record_extraction

        def timed(conn: Any, workspace_id: Any, file_id: Any, result: Any) -> None:
            started = time.perf_counter()
            record(conn, workspace_id, file_id, result)
            stored["s"] = time.perf_counter() - started
            stored["chunks"] = 0 if isinstance(result, str) else len(split_text(result.text))

        worker.record_extraction = timed
        started = time.perf_counter()
        worker.extract_pending(db, settings)
        total = time.perf_counter() - started
        print(
            f"{args.mb:g} MB of random bytes: {total:.1f} s in all, "
            f"{stored['s']:.1f} s storing {stored['chunks']:,} chunks"
        )
        db.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
