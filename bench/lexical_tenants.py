"""The lexical index at many workspaces: one Tantivy index per workspace and source, so that a
workspace's BM25 scores are its own. What that costs as the workspaces grow in number.

Makes WORKSPACES workspaces on a fresh embedded Postgres, each with one page of BULLETS
bullets, then measures: the rebuild (seconds, files and bytes on disk), a follower round
with nothing to apply (it checks every index's files by their stamps), a round applying one
bullet written in one workspace and one in each of ten (the commit cost), and a reader that
has searched every workspace once (its memory, the files it maps, and the time of a first
search against one of a workspace already open).

    python bench/lexical_tenants.py [--workspaces 1000] [--bullets 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace import commands
from subspace.config import Settings
from subspace.database import Database, open_database
from subspace.db.pool import open_pool
from subspace.ingest.outline import OutlineItem
from subspace.providers.fake import FakeProvider
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.request import SearchRequest
from subspace.search.service import search
from subspace.workspaces import create_workspace, list_workspaces, workspace_owner

CURLEW = SearchRequest(query="curlew", mode="lexical")
WORDS = "tern gull plover heron egret curlew godwit dunlin knot sanderling".split()


def resident_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def mappings() -> int:
    with open("/proc/self/maps") as handle:
        return sum(1 for _ in handle)


def timed(action: Any) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def read_every_workspace(dsn: str, home: str) -> dict[str, float]:
    """In this process: search every workspace of the database once, then a hundred again;
    the memory and mappings that took, and the searches' p50."""
    settings = Settings(home=Path(home), database_url=dsn, providers="fake")
    db = Database(dsn=dsn, pool=open_pool(dsn, max_size=4), embedded=None)
    with db.pool.connection() as conn:
        actors = [workspace_owner(conn, w.id) for w in list_workspaces(conn)]
    cx = db.default_context(settings)
    tenants = [replace(cx, actor=actor) for actor in actors]
    searcher = db.searcher(FakeProvider())
    search(tenants[0], searcher, CURLEW)  # the process's own first-search costs
    before_mb, before_maps = resident_mb(), mappings()
    first = [timed(lambda t=tenant: search(t, searcher, CURLEW)) for tenant in tenants]
    again = [timed(lambda t=tenant: search(t, searcher, CURLEW)) for tenant in tenants[:100]]
    return {
        "reader_mb": round(resident_mb() - before_mb, 1),
        "reader_mappings": mappings() - before_maps,
        "first_search_ms": round(statistics.median(first) * 1000, 2),
        "open_search_ms": round(statistics.median(again) * 1000, 2),
    }


def main() -> None:
    if sys.argv[1:2] == ["--read"]:
        print(json.dumps(read_every_workspace(sys.argv[2], sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workspaces", type=int, default=1000)
    parser.add_argument("--bullets", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp), providers="fake", index_sweep_s=0)
        db = open_database(settings)
        cx = db.default_context(settings)
        contexts = []
        with db.pool.connection() as conn:
            for n in range(args.workspaces):
                contexts.append(replace(cx, actor=create_workspace(conn, f"Tenant {n}")))
        for n, tenant in enumerate(contexts):
            outline = [
                OutlineItem(f"{WORDS[(n + b) % len(WORDS)]} note {b} of tenant {n} " * (1 + b % 4))
                for b in range(args.bullets)
            ]
            commands.create_page_from_outline(tenant, f"Page of tenant {n}", outline)

        follower = LexicalFollower(db, settings)
        rebuild_s = timed(follower.rebuild)
        folder = follower.folder
        files = [p for p in folder.rglob("*") if p.is_file()]
        idle = [timed(follower.run_once) for _ in range(5)]

        def write_in(tenants: list[Any]) -> float:
            for tenant in tenants:
                page = commands.create_page(tenant, "Another page")
                commands.add_node(tenant, page.id, "a late curlew on the mudflat")
            return timed(follower.run_once)

        one = [write_in(contexts[k : k + 1]) for k in range(5)]
        ten = [write_in(contexts[k * 10 : k * 10 + 10]) for k in range(5)]
        follower.close()

        # A reader in a process of its own, as a server's is: its memory is not the
        # rebuild's, which this one holds.
        read = subprocess.run(
            [sys.executable, __file__, "--read", db.dsn, tmp],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        reader = json.loads(read)
        result = {
            "workspaces": args.workspaces,
            "bullets_each": args.bullets,
            "rebuild_s": round(rebuild_s, 2),
            "index_files": len(files),
            "index_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
            "idle_round_ms": round(statistics.median(idle) * 1000, 1),
            "round_one_workspace_ms": round(statistics.median(one) * 1000, 1),
            "round_ten_workspaces_ms": round(statistics.median(ten) * 1000, 1),
            **reader,
        }
        db.close()
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"{result['workspaces']:,} workspaces of {result['bullets_each']} bullets: rebuilt in "
        f"{result['rebuild_s']} s, {result['index_files']:,} files, {result['index_mb']} MB"
    )
    print(
        f"follower round: idle {result['idle_round_ms']} ms, one workspace written "
        f"{result['round_one_workspace_ms']} ms, ten {result['round_ten_workspaces_ms']} ms"
    )
    print(
        f"reader after searching every workspace: +{result['reader_mb']} MB, "
        f"+{result['reader_mappings']:,} mappings; a search p50 {result['first_search_ms']} ms "
        f"first, {result['open_search_ms']} ms open"
    )


if __name__ == "__main__":
    main()
