"""The lexical index's life: built when it is missing, unreadable, of an older format or of
another database; a follower killed in a commit loses nothing; a folder deleted under a
running follower degrades searches until it is rebuilt; and under twenty writers at once,
every acknowledged write is found by the next search."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from uuid import UUID

import pytest

from subspace import commands
from subspace.background import Background
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import open_pool
from subspace.ingest.outline import OutlineItem
from subspace.ingest.worker import extract_pending
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.lexical.index.layout import (
    CURRENT,
    STATE,
    current_generation,
    database_folder,
    database_identity,
    documents,
    index_root,
)
from subspace.search.lexical.index.status import lexical_status
from subspace.search.shared import SearchRuntime
from tests.search_helpers import follow, ids, run

ROOT = Path(__file__).resolve().parents[2]
REBUILDING = "lexical: ranked in Postgres until the lexical index is rebuilt"


def folder_of(database: Database, settings: Settings) -> Path:
    with database.pool.connection() as conn:
        return database_folder(index_root(settings), database_identity(conn))


def index_documents(database: Database, settings: Settings) -> dict[str, set[object]]:
    """Every live document of the index `settings` name, per source."""
    generation = current_generation(folder_of(database, settings))
    assert generation is not None
    state = json.loads((generation / STATE).read_text())
    return {source: set(documents(generation, source)) for source in state["kinds"]}


def rebuilt(database: Database, settings: Settings, root: Path) -> dict[str, set[object]]:
    """The documents of an index built from nothing in `root`."""
    elsewhere = replace(settings, lexical_dir=root)
    follower = LexicalFollower(database, elsewhere)
    try:
        follower.rebuild()
    finally:
        follower.close()
    return index_documents(database, elsewhere)


def write_everything(database: Database, cx: Context) -> dict[str, UUID]:
    """Writes of every kind: bullets added, edited and deleted, a page archived, a file and a
    mail; their words are each found only where written."""
    page = commands.create_page(cx, "Logbook")
    kept = commands.add_node(cx, page.id, "the kestrel circles the quarry")
    gone = commands.add_node(cx, page.id, "the plover leaves at dusk")
    other = commands.create_page(cx, "Shelved osprey notes")
    commands.add_node(cx, other.id, "an osprey nest on the pylon")
    follow(database, cx)
    commands.edit_node(cx, kept.id, "the kestrel hovers over the marsh")
    commands.delete_node(cx, gone.id)
    fresh = commands.add_node(cx, page.id, "a heron fishing in the shallows")
    commands.archive_page(cx, other.id)
    file = commands.upload_file(cx, "sightings.txt", b"A bittern booming in the reeds.")
    extract_pending(database, cx.settings)
    mail = commands.add_mail(cx, message_id="<w@x>", subject="Wagtail count", body_text="Nine.")
    return {"kept": kept.id, "fresh": fresh.id, "file": file.id, "mail": mail.id}


def assert_found_as_written(database: Database, cx: Context, made: dict[str, UUID]) -> None:
    assert ids(run(database, cx, "kestrel marsh", mode="lexical")) == [made["kept"]]
    assert ids(run(database, cx, "quarry", mode="lexical")) == []  # the edited bullet's old words
    assert ids(run(database, cx, "plover", mode="lexical")) == []  # deleted
    assert ids(run(database, cx, "osprey", mode="lexical")) == []  # archived
    assert ids(run(database, cx, "heron", mode="lexical")) == [made["fresh"]]
    assert ids(run(database, cx, "bittern", mode="lexical")) == [made["file"]]
    assert ids(run(database, cx, "wagtail", mode="lexical")) == [made["mail"]]


def test_writes_are_found_before_the_index_applies_them_and_after(
    database: Database, cx: Context
) -> None:
    made = write_everything(database, cx)
    assert_found_as_written(database, cx, made)  # from the delta
    assert run(database, cx, "kestrel", mode="lexical").degraded == []
    follow(database, cx)
    assert_found_as_written(database, cx, made)  # from the index


@pytest.mark.parametrize("mode", ["mid-commit", "before-position"])
def test_a_follower_killed_in_a_commit_resumes_and_equals_a_rebuild(
    database: Database, settings: Settings, cx: Context, tmp_path: Path, mode: str
) -> None:
    made = write_everything(database, cx)
    before = (current_generation(folder_of(database, settings)) / STATE).read_text()  # type: ignore[operator]
    killed = subprocess.run(
        [sys.executable, "-m", "tests.lexical_crash", database.dsn, str(settings.home), mode],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after = (current_generation(folder_of(database, settings)) / STATE).read_text()  # type: ignore[operator]
    assert after == before  # the position was not moved past what was committed
    assert_found_as_written(
        database, cx, made
    )  # the index is part applied: the delta covers it all
    follow(database, cx)
    assert index_documents(database, settings) == rebuilt(database, settings, tmp_path / "x")
    assert_found_as_written(database, cx, made)


def _damage(folder: Path, how: str) -> None:
    generation = current_generation(folder)
    assert generation is not None
    state = generation / STATE
    if how == "missing":
        shutil.rmtree(folder)
    elif how == "unreadable":
        for meta in generation.glob("*/node/meta.json"):
            meta.write_text("{ not json")
    elif how == "older format":
        state.write_text(json.dumps(json.loads(state.read_text()) | {"format": 1}))
    elif how == "other database":
        state.write_text(json.dumps(json.loads(state.read_text()) | {"database": "elsewhere"}))
    elif how == "no generation":
        (folder / CURRENT).write_text("g0")


@pytest.mark.parametrize(
    "how", ["missing", "unreadable", "older format", "other database", "no generation"]
)
def test_an_index_that_cannot_serve_is_rebuilt_while_postgres_answers(
    database: Database, settings: Settings, cx: Context, tmp_path: Path, how: str
) -> None:
    made = write_everything(database, cx)
    follow(database, cx)
    _damage(folder_of(database, settings), how)
    degraded = run(database, cx, "heron", mode="lexical")
    assert degraded.degraded, how
    assert degraded.degraded[0].startswith(REBUILDING), how
    assert_found_as_written(database, cx, made)  # every row ranked in Postgres meanwhile
    follow(database, cx)
    assert run(database, cx, "heron", mode="lexical").degraded == []
    assert_found_as_written(database, cx, made)
    assert index_documents(database, settings) == rebuilt(database, settings, tmp_path / "x")


def test_a_folder_deleted_under_a_running_follower_degrades_then_recovers(
    database: Database, settings: Settings, cx: Context
) -> None:
    page = commands.create_page(cx, "Shore")
    commands.add_node(cx, page.id, "a curlew on the mudflat")
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()
        assert run(database, cx, "curlew", mode="lexical").degraded == []
        shutil.rmtree(folder_of(database, settings))
        node = commands.add_node(cx, page.id, "a second curlew")
        searched = run(database, cx, "curlew", mode="lexical")
        assert searched.degraded
        assert searched.degraded[0].startswith(REBUILDING)
        assert node.id in ids(searched)
        done = follower.run_once()  # its writers pointed into the folder deleted
        assert done.rebuilt
        recovered = run(database, cx, "curlew", mode="lexical")
        assert recovered.degraded == []
        assert node.id in ids(recovered)
    finally:
        follower.close()


@pytest.fixture
def busy_database(db_dsn: str) -> Iterator[Database]:
    """A database for twenty writers at once, each searching after each write."""
    db = Database(dsn=db_dsn, pool=open_pool(db_dsn, max_size=24), embedded=None,
                  search_runtime=SearchRuntime(searches_per_workspace=24))  # fmt: skip
    yield db
    db.close()


def test_every_acknowledged_write_is_found_by_the_next_search_under_twenty_writers(
    busy_database: Database, settings: Settings
) -> None:
    cx = busy_database.default_context(settings)
    page = commands.create_page(cx, "Busy")
    background = Background()
    background.start_loop("lexical-follower", LexicalFollower(busy_database, settings))
    missed: list[str] = []

    def write(writer: int) -> None:
        for n in range(8):
            word = f"zq{writer}w{n}x"
            node = commands.add_node(cx, page.id, f"note {word} from writer {writer}")
            if node.id not in ids(run(busy_database, cx, word, mode="lexical")):
                missed.append(word)

    try:
        writers = [threading.Thread(target=write, args=(n,)) for n in range(20)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(timeout=120)
    finally:
        background.stop()
    assert missed == []
    follow(busy_database, cx)
    with busy_database.pool.connection() as conn:
        status = lexical_status(conn, settings)
    assert status.behind is not None
    assert status.behind.events == 0
    assert len(ids(run(busy_database, cx, "note", mode="lexical", limit=100))) == 100


def test_a_bulk_import_far_ahead_of_the_index_is_found_whole_and_says_how_far(
    database: Database, settings: Settings, cx: Context
) -> None:
    follow(database, cx)  # the index, built before the import
    items = [OutlineItem(f"import line {n} mentions the dunlin") for n in range(300)]
    page = commands.create_page_from_outline(cx, "Imported", items)
    for n in range(20):
        commands.add_node(cx, page.id, f"dunlin note {n}")
    patient = replace(cx, settings=replace(cx.settings, lexical_max_lag_s=3600))
    assert (
        run(database, patient, "dunlin", mode="lexical").degraded == []
    )  # behind, within the bound
    strict = replace(cx, settings=replace(cx.settings, lexical_max_lag_s=0))
    behind = run(database, strict, "dunlin", mode="lexical", limit=100)
    assert len(behind.rows) == 100
    assert behind.degraded[0].startswith("lexical: the lexical index is 21 writes")
    with database.pool.connection() as conn:
        status = lexical_status(conn, settings)
    assert status.behind is not None
    assert status.behind.events == 21
    follow(database, cx)
    caught_up = run(database, strict, "dunlin", mode="lexical", limit=100)
    assert caught_up.degraded == []
    assert len(caught_up.rows) == 100
    # The short notes rank first either way; the imported lines all score alike, and which of
    # a tie across the window the index reads is its own order (collector._top_targets).
    notes = set(ids(run(database, strict, "dunlin note", mode="lexical", limit=20)))
    assert set(ids(caught_up)[:20]) == set(ids(behind)[:20]) == notes


def test_one_follower_writes_a_folder_and_another_takes_over_when_it_stops(
    database: Database, settings: Settings, cx: Context
) -> None:
    """Several processes (serve, indexer, the CLI) may run a follower on one folder: the
    folder's lock lets one write, and the next takes over once it is given back (by close, or
    by the kernel when the process dies)."""
    page = commands.create_page(cx, "Shared")
    first, second = LexicalFollower(database, settings), LexicalFollower(database, settings)
    try:
        assert first.run_once().rebuilt
        commands.add_node(cx, page.id, "a curlew on the mudflats")
        waiting = second.run_once()
        assert (waiting.items, waiting.rebuilt, second.writers) == (0, False, None)
        assert first.run_once().items == 1
        first.close()
        commands.add_node(cx, page.id, "a godwit beside it")
        assert second.run_once().items == 1  # the same index, not a new one
        assert second.writers is not None
        assert second.position is not None
        assert ids(run(database, cx, "curlew godwit", mode="lexical", typos=False)) != []
        with database.pool.connection() as conn:
            status = lexical_status(conn, settings)
        assert status.behind is not None
        assert status.behind.events == 0
    finally:
        first.close()
        second.close()


def test_reindex_builds_the_lexical_index_anew(
    database: Database, settings: Settings, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from subspace.cli import main

    made = write_everything(database, cx)
    follow(database, cx)
    _damage(folder_of(database, settings), "unreadable")
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(settings.home))
    monkeypatch.setenv("PROVIDERS", "fake")
    result = CliRunner().invoke(main, ["reindex"])
    assert result.exit_code == 0, result.output
    assert "Built the lexical index" in result.stdout
    assert run(database, cx, "heron", mode="lexical").degraded == []
    assert_found_as_written(database, cx, made)
    assert index_documents(database, settings) == rebuilt(database, settings, settings.home / "x")
    # The command line reads the index as the server does.
    found = CliRunner().invoke(main, ["search", "heron", "--mode", "lexical", "--json"])
    assert found.exit_code == 0, found.output
    answer = json.loads(found.stdout)
    assert answer["degraded"] == []
    assert [r["id"] for r in answer["rows"]] == [str(made["fresh"])]
