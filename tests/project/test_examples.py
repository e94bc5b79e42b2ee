"""The runnable examples under examples/ still run, against the test database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(settings: Settings, *args: str) -> str:
    env = {
        **os.environ,
        "SUBSPACE_DATABASE_URL": settings.database_url,
        "SUBSPACE_HOME": str(settings.home),
        "PROVIDERS": "fake",
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "search_a_folder.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def results(output: str) -> list[str]:
    """The numbered result lines, best first."""
    return [line for line in output.splitlines() if re.match(r"\d+\. ", line)]


def test_search_a_folder_finds_the_shipped_note(
    settings: Settings, cx: Context, database: Database
) -> None:
    output = run_example(settings)
    assert "{'added': 3}" in output
    first = results(output)[0]
    assert first.startswith("1. [node] lisbon-trip › Day two: The ferry card is in the blue wallet")
    # It wrote into the database it was given: the pages are there, and a second run adds none.
    kb = commands.find_knowledge_base(cx, "Example notes")
    assert kb is not None
    with database.pool.connection() as conn:
        pages = conn.execute(
            "select title from kb.pages where workspace_id = %s and kb_id = %s order by title",
            (cx.actor.workspace_id, kb.id),
        ).fetchall()
    assert [page["title"] for page in pages] == ["garden", "lisbon-trip", "reading-list"]
    assert "{'unchanged': 3}" in run_example(settings)


def test_search_a_folder_searches_the_folder_and_query_given(
    settings: Settings, tmp_path: Path
) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "boat.md").write_text("# Sailing\n\n- Check the jib sheets before casting off\n")
    (folder / "kitchen.txt").write_text("Descale the kettle every month\n")
    output = run_example(settings, str(folder), "kettle")
    assert results(output)[0].startswith("1. [node] kitchen: Descale the kettle")
    # The boat note shares no word with the query and is not near it in meaning: no padding.
    assert "Sailing" not in output
