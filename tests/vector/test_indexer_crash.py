"""Kill the indexer at its two dangerous moments; after a restart nothing is lost or doubled."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.indexer.chunking import text_hash
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.queue import backlog
from tests.providers import CountingProvider

ROOT = Path(__file__).resolve().parents[2]


def state(database: Database) -> tuple[list[tuple[str, str]], int]:
    with database.pool.connection() as conn:
        rows = conn.execute("select ref, text_hash from search.embeddings order by ref").fetchall()
        return [(r["ref"], r["text_hash"]) for r in rows], backlog(conn).events


@pytest.mark.parametrize(("mode", "calls_after_restart"), [("after-embed", 1), ("after-commit", 0)])
def test_killed_indexer_resumes_exactly(
    database: Database, settings: Settings, cx: Context, mode: str, calls_after_restart: int
) -> None:
    page = commands.create_page(cx, "Crash")
    node = commands.add_node(cx, page.id, "survives a SIGKILL")
    killed = subprocess.run(
        [sys.executable, "-m", "tests.indexer_crash", database.dsn, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    refs, pending = state(database)
    if mode == "after-embed":
        assert refs == []
        assert pending == 2
    else:
        assert len(refs) == 2
        assert pending == 2

    provider = CountingProvider()
    EmbeddingsFollower(database, settings, provider).drain()
    refs, pending = state(database)
    assert refs == sorted(
        [
            (f"node:{node.id}", text_hash("survives a SIGKILL")),
            (f"page:{page.id}", text_hash("Crash")),
        ]
    )
    assert pending == 0
    assert len(provider.calls) == calls_after_restart
