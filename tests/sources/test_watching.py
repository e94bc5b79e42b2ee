"""A server keeps a watched folder in sync by itself: a file created, edited, renamed or
deleted is searchable (or gone) without a command, a burst of 1,000 files all arrive, and
what changed while the server was stopped is caught up on at start."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from httpx import Response

from subspace.config import Settings
from subspace.database import Database
from subspace.models import Actor
from tests.conftest import make_client

pytestmark = pytest.mark.slow


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def titles(client: TestClient, query: str) -> set[str]:
    """The titles of the pages whose bullets hold every word of `query`."""
    answer = client.get("/api/search", params={"q": query, "mode": "lexical", "kind": "node"})
    assert answer.status_code == 200, answer.text
    words = query.split()
    return {row["title"] for row in answer.json()["rows"]
            if all(word in row["passage"] for word in words)}  # fmt: skip


def page_count(database: Database, *, live: bool = True) -> int:
    with database.pool.connection() as conn:
        where = "archived_at is null" if live else "true"
        row = conn.execute(f"select count(*) as n from kb.pages where {where} "
                           "and source_path is not null").fetchone()  # fmt: skip
    return int(row["n"]) if row else 0


@contextmanager
def watching(
    database: Database, settings: Settings, actor: Actor, notes: Path, first: str
) -> Iterator[tuple[TestClient, Response]]:
    """A served app (its lifespan runs the sync) following `notes`, made with one page."""
    notes.mkdir()
    (notes / "first.md").write_text(first)
    with make_client(database, settings, actor) as client:
        added = client.post("/api/sources", json={"kind": "folder", "name": "Notes",
                                                  "path": str(notes)})  # fmt: skip
        assert added.status_code == 201, added.text
        yield client, added


def test_changes_in_a_watched_folder_follow_while_the_server_runs(
    database: Database, keyed: Settings, actor: Actor, tmp_path: Path
) -> None:
    settings = dataclasses.replace(keyed, folder_roots=str(tmp_path))
    notes = tmp_path / "notes"
    with watching(database, settings, actor, notes, "# Start\n\n- the first note\n") as (
        client,
        added,
    ):
        wait_for(lambda: titles(client, "first note") == {"Start"})

        (notes / "ferry.md").write_text("# Ferry\n\n- the ferry leaves at dawn\n")
        wait_for(lambda: titles(client, "ferry dawn") == {"Ferry"})

        (notes / "ferry.md").write_text("# Ferry\n\n- the ferry leaves at dusk\n")
        wait_for(lambda: titles(client, "ferry dusk") == {"Ferry"})
        assert titles(client, "dawn") == set()

        # An editor's atomic save: written beside, then renamed over the file.
        (notes / ".ferry.md.swp").write_text("the editor's own")
        (notes / "ferry.md.tmp").write_text("# Ferry\n\n- the ferry leaves at noon\n")
        os.replace(notes / "ferry.md.tmp", notes / "ferry.md")
        wait_for(lambda: titles(client, "ferry noon") == {"Ferry"})
        assert page_count(database, live=False) == 2  # no page for the temporary files

        (notes / "trips").mkdir()
        os.rename(notes / "ferry.md", notes / "trips" / "ferry.md")
        wait_for(lambda: page_count(database, live=False) == 2 and _moved(database))

        (notes / "first.md").unlink()
        wait_for(lambda: titles(client, "first note") == set())  # archived: out of search
        assert page_count(database, live=False) == 2  # kept, restorable

        burst = notes / "burst"
        burst.mkdir()
        for n in range(1000):
            (burst / f"n{n:04d}.md").write_text(f"# Note {n}\n\n- harbour log {n}, quay{n}\n")
        wait_for(lambda: page_count(database) == 1001, timeout_s=240)
        assert titles(client, "quay999") == {"Note 999"}
        source = client.get(f"/api/sources/{added.json()['id']}").json()
        assert source["status"] == "ok" and source["errors"] == []

    # Stopped: changes made meanwhile are caught up on at the next start.
    (burst / "n0000.md").unlink()
    (notes / "late.md").write_text("# Late\n\n- written while the server was stopped\n")
    with make_client(database, settings, actor) as client:  # its lifespan: the sync runs
        wait_for(lambda: titles(client, "written while the server was stopped") == {"Late"})
        wait_for(lambda: page_count(database) == 1001)


def _moved(database: Database) -> bool:
    with database.pool.connection() as conn:
        row = conn.execute("select source_path from kb.pages where title = 'Ferry'").fetchone()
    return row is not None and row["source_path"] == "notes/trips/ferry.md"


def test_a_folder_made_anew_at_the_watched_path_is_followed(
    database: Database, keyed: Settings, actor: Actor, tmp_path: Path
) -> None:
    settings = dataclasses.replace(keyed, folder_roots=str(tmp_path))
    notes = tmp_path / "notes"
    with watching(database, settings, actor, notes, "# A\n\n- the alpha note\n") as (client, _):
        wait_for(lambda: titles(client, "alpha note") == {"A"})
        os.rename(notes, tmp_path / "old-notes")
        notes.mkdir()
        (notes / "c.md").write_text("# C\n\n- the gamma note\n")
        wait_for(lambda: titles(client, "gamma note") == {"C"})
        (notes / "d.md").write_text("# D\n\n- the delta note\n")  # followed, not scanned
        wait_for(lambda: titles(client, "delta note") == {"D"})
