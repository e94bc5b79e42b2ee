"""How long a write waits before the lexical index holds it, with twenty writers at once.

A search finds a write at once from the delta (search/lexical/delta.py); this measures the
follower: writers add bullets to pages of their own as fast as they can, a follower runs as
in `subspace serve`, and at each of its commits the events the new position holds and the old
one did not are read back: each one's lag is the database's clock at the commit less the
event's own time. Prints the p50, p95 and p99 lag and the writes per second.

    python bench/lexical_lag.py [--writers 20] [--seconds 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.search_latency import quantiles
from subspace import commands
from subspace.config import Settings
from subspace.database import open_database
from subspace.search.lexical.index.follower import Followed, LexicalFollower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), providers="fake", index_sweep_s=0)
        db = open_database(settings, pool_size=args.writers + 4)
        cx = db.default_context(settings)
        follower = LexicalFollower(db, settings)
        follower.run_once()  # the empty index, built before the clock starts
        lags: list[float] = []
        previous: list[str | None] = [None]

        def committed(done: Followed) -> None:
            with db.pool.connection() as conn:
                rows = conn.execute(
                    "select extract(epoch from clock_timestamp() - o.created_at) * 1000 as ms "
                    "from kb.outbox o where pg_visible_in_snapshot(o.xid, %s::pg_snapshot) "
                    "and (%s::text is null or not pg_visible_in_snapshot(o.xid, %s::pg_snapshot))",
                    (done.position, previous[0], previous[0]),
                ).fetchall()
            lags.extend(float(r["ms"]) for r in rows)
            previous[0] = done.position

        previous[0] = follower.position
        follower.on_committed = committed
        stop = threading.Event()
        written = [0] * args.writers

        def write(n: int) -> None:
            page = commands.create_page(cx, f"Writer {n}")
            while not stop.is_set():
                commands.add_node(cx, page.id, f"note {written[n]} from writer {n}")
                written[n] += 1

        thread = threading.Thread(target=follower.run, daemon=True)
        writers = [threading.Thread(target=write, args=(n,)) for n in range(args.writers)]
        started = time.perf_counter()
        thread.start()
        for writer in writers:
            writer.start()
        time.sleep(args.seconds)
        stop.set()
        for writer in writers:
            writer.join()
        elapsed = time.perf_counter() - started
        time.sleep(3)  # the last writes applied
        follower.stop()
        thread.join(timeout=10)
        db.close()
    p50, p95, p99 = quantiles(lags)
    found: dict[str, Any] = {"writers": args.writers, "writes": sum(written),
                             "writes_per_s": round(sum(written) / elapsed, 1),
                             "lag_p50_ms": round(p50, 1), "lag_p95_ms": round(p95, 1),
                             "lag_p99_ms": round(p99, 1), "events": len(lags)}  # fmt: skip
    print(json.dumps(found) if args.json else "\n".join(f"{k}: {v}" for k, v in found.items()))


if __name__ == "__main__":
    main()
