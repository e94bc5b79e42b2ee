"""A damaged lexical index heals: whatever bytes its files hold, a search answers (from
Postgres, saying why, when the engine cannot be trusted), the follower repairs or rebuilds
it without a restart, and a restart on a damaged folder does the same."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import open_pool
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.lexical.index.integrity import DAMAGED, footer_problem
from subspace.search.lexical.index.layout import (
    CURRENT,
    DISK_FULL,
    STATE,
    current_generation,
    index_root,
)
from tests.conftest import make_client
from tests.lexical.test_lexical_index import (
    REBUILDING,
    assert_found_as_written,
    folder_of,
    write_everything,
)
from tests.search_helpers import ids, run

# Every kind of file a generation holds: the follower's record (CURRENT, the state) and the
# engine's (its meta files and each part of a segment; a segment's deletes are checked the same
# way, but the engine merges them away too soon to damage one here).
FILES = ["CURRENT", "state", "meta.json", ".managed.json", "idx", "term", "pos", "fast",
         "fieldnorm", "store"]  # fmt: skip
HOWS = ["random bytes", "empty", "bytes overwritten in place", "JSON nested too deep"]
SEGMENT_PARTS = ("idx", "term", "pos", "fast", "fieldnorm", "store")
# A segment file truncated while a process has it mapped kills that process at its next read
# (SIGBUS; search/lexical/index/integrity.py): no code can answer then, so a running reader meets
# segments damaged in every way but that one, and a restart meets them truncated too.
WHILE_RUNNING = [
    (kind, how) for kind in FILES for how in HOWS if not (kind in SEGMENT_PARTS and how == "empty")
]


def _path_of(folder: Path, kind: str) -> Path:
    generation = current_generation(folder)
    assert generation is not None
    if kind == "CURRENT":
        return folder / CURRENT
    if kind == "state":
        return generation / STATE
    # The bullets' source of the one workspace written: every write above touches it.
    (index,) = generation.glob("*/node")
    if kind in ("meta.json", ".managed.json"):
        return index / kind
    found = sorted(index.glob(f"*.{kind}"))
    assert found, f"no .{kind} file in {index}"
    return found[0]


def damage(folder: Path, kind: str, how: str, seed: int = 7) -> Path:
    path = _path_of(folder, kind)
    size = path.stat().st_size
    os.chmod(path, 0o644)  # verified segment files are read-only; the damage is deliberate
    if how == "random bytes":
        path.write_bytes(random.Random(seed).randbytes(max(size, 2)))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "JSON nested too deep":  # json.loads raises RecursionError, not ValueError
        path.write_bytes(b"[" * 100_000)
    else:  # inside the body: a segment's footer is its last bytes (up to 100 here)
        chooser = random.Random(seed)
        with path.open("r+b") as handle:
            for _ in range(5):
                handle.seek(chooser.randrange(max(size - 100, 1)))
                handle.write(chooser.randbytes(2))
    return path


@pytest.fixture
def written(database: Database, cx: Context) -> dict[str, UUID]:
    return write_everything(database, cx)


def fresh_database(database: Database) -> Database:
    """Another process's view of the same database: a reader that has seen nothing yet."""
    return Database(dsn=database.dsn, pool=open_pool(database.dsn, max_size=2), embedded=None)


@pytest.mark.parametrize(("kind", "how"), WHILE_RUNNING)
def test_damage_under_a_running_follower_heals_without_a_restart(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID],
    kind: str, how: str,
) -> None:  # fmt: skip
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()
        assert run(database, cx, "heron", mode="lexical").degraded == []  # the view is loaded
        damage(folder_of(database, settings), kind, how)
        for mode in ("lexical", "hybrid"):
            run(database, cx, "heron", mode=mode)  # answers, whatever the engine finds
        follower.run_once()  # heals: the record written again, or the index rebuilt
        healed = run(database, cx, "heron", mode="lexical")
        assert healed.degraded == [], (kind, how)
        assert_found_as_written(database, cx, written)
    finally:
        follower.close()


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("kind", FILES)
def test_a_restart_on_a_damaged_folder_ranks_in_postgres_then_rebuilds(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID],
    kind: str, how: str,
) -> None:  # fmt: skip
    follower = LexicalFollower(database, settings)
    follower.run_once()
    follower.close()
    damage(folder_of(database, settings), kind, how)
    restarted = fresh_database(database)
    try:
        searched = run(restarted, cx, "heron", mode="lexical")
        assert searched.degraded and searched.degraded[0].startswith(REBUILDING), (kind, how)
        assert_found_as_written(restarted, cx, written)
        follower = LexicalFollower(restarted, settings)
        try:
            assert follower.run_once().rebuilt or kind in ("CURRENT", "state")
        finally:
            follower.close()
        assert run(restarted, cx, "heron", mode="lexical").degraded == []
        assert_found_as_written(restarted, cx, written)
    finally:
        restarted.close()


def test_a_segment_changed_under_a_loaded_view_is_found_by_its_checksum(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID]
) -> None:
    """The engine may not notice bytes changed in a segment (it checks only the footer's
    magic): a reader told a search failed checks every file, and stops serving a generation
    whose checksums fail."""
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()
        assert run(database, cx, "heron", mode="lexical").degraded == []
        folder = folder_of(database, settings)
        path = damage(folder, "term", "bytes overwritten in place")
        assert "checksum" in footer_problem(path)
        reader = database.search_runtime.lexical_reader(index_root(settings), lambda: "")
        view = reader.view(cx.actor.workspace_id)
        assert view is not None  # nothing told it yet
        reader.failed(view, ValueError("as the engine would raise"))
        searched = run(database, cx, "heron", mode="lexical")
        assert searched.degraded[0].startswith(REBUILDING)
        assert "damaged" in searched.degraded[0]
        assert ids(searched) == [written["fresh"]]
        done = follower.run_once()
        assert done.rebuilt
        assert run(database, cx, "heron", mode="lexical").degraded == []
    finally:
        follower.close()


def test_the_follower_keeps_readers_off_a_generation_it_finds_damaged(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID]
) -> None:
    """Its round checks the files first: CURRENT is removed before the rebuild, so no
    reader serves the damaged generation meanwhile."""
    follower = LexicalFollower(database, settings)
    seen: list[bool] = []
    try:
        follower.run_once()
        folder = folder_of(database, settings)
        old = current_generation(folder)
        damage(folder, "idx", "bytes overwritten in place")
        original = follower.rebuild

        def watched(*args: object, **kwargs: object) -> int:
            seen.append((folder / CURRENT).exists())
            return original(*args, **kwargs)

        follower.rebuild = watched  # type: ignore[method-assign]
        assert follower.run_once().rebuilt
        assert seen == [False]
        assert current_generation(folder) not in (None, old)
    finally:
        follower.close()


def test_http_searches_answer_while_current_holds_bytes_that_are_not_text(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID]
) -> None:
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()
        client = make_client(database, settings, cx.actor)
        (folder_of(database, settings) / CURRENT).write_bytes(b"\xa9\xff")
        for mode in ("lexical", "hybrid"):
            answer = client.get("/api/search", params={"q": "heron", "mode": mode})
            assert answer.status_code == 200, answer.text
            assert any(d.startswith(REBUILDING) for d in answer.json()["degraded"])
        assert client.get("/readyz").json()["checks"]["lexical_index"].startswith("degraded")
        follower.run_once()
        answer = client.get("/api/search", params={"q": "heron", "mode": "lexical"})
        assert answer.json()["degraded"] == []
        assert client.get("/readyz").json()["checks"]["lexical_index"] == "ok"
    finally:
        follower.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs: the index folder of a machine whose disk fills up."""
    where = tmp_path / "small-disk"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(where)],
                             capture_output=True, text=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_is_said_and_searches_go_on(
    database: Database, settings: Settings, cx: Context, small_disk: Path
) -> None:
    settings = Settings(home=settings.home, database_url=settings.database_url,
                        providers="fake", lexical_dir=small_disk)  # fmt: skip
    cx = database.default_context(settings)
    page = commands.create_page(cx, "Shore")
    commands.add_node(cx, page.id, "a curlew on the mudflat")
    follower = LexicalFollower(database, settings)
    client = make_client(database, settings, cx.actor)
    ballast = small_disk / "ballast"
    try:
        follower.run_once()
        with ballast.open("wb") as handle:  # fill the disk to its last byte
            try:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
            except OSError:
                pass
        words = " ".join(f"curlew{n} godwit{n} redshank{n}" for n in range(2500))
        for _ in range(20):  # more than the few kilobytes left can take
            commands.add_node(cx, page.id, words)
        node = commands.add_node(cx, page.id, "a whimbrel on the shore")
        follower.step()
        assert follower.failures == 1  # the writer failed: the disk is full
        assert (follower.folder / DISK_FULL).exists()
        searched = run(database, cx, "whimbrel", mode="lexical")
        assert ids(searched) == [node.id]  # found from Postgres
        assert any("disk holding the lexical index is full" in d for d in searched.degraded)
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert "full" in ready.json()["checks"]["lexical_index"]
        ballast.unlink()
        follower.step()
        assert follower.failures == 0
        assert not (follower.folder / DISK_FULL).exists()
        assert run(database, cx, "curlew", mode="lexical").degraded == []
    finally:
        follower.close()


def test_a_folder_where_current_should_be_is_replaced_and_leaves_no_generation_behind(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID]
) -> None:
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()
        folder = folder_of(database, settings)
        (folder / CURRENT).unlink()
        (folder / CURRENT).mkdir()
        searched = run(database, cx, "heron", mode="lexical")
        assert searched.degraded[0].startswith(REBUILDING)
        assert "CURRENT" in searched.degraded[0]
        for _ in range(2):
            follower.step()
            assert follower.failures == 0
        assert run(database, cx, "heron", mode="lexical").degraded == []
        assert len(list(folder.glob("g*"))) == 1  # no generation left behind by a failure
        assert not list(folder.glob(".CURRENT.*"))
    finally:
        follower.close()


@pytest.mark.parametrize("position", ["zzz", 12, "1:2:3:4", ["1:2:"]])
def test_a_state_whose_position_is_not_a_snapshot_is_damaged(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID],
    position: object,
) -> None:  # fmt: skip
    follower = LexicalFollower(database, settings)
    follower.run_once()
    follower.close()
    state = _path_of(folder_of(database, settings), "state")
    state.write_text(json.dumps(json.loads(state.read_text()) | {"position": position}))
    restarted = fresh_database(database)
    try:
        searched = run(restarted, cx, "heron", mode="lexical")
        assert searched.degraded[0].startswith(REBUILDING)
        assert_found_as_written(restarted, cx, written)
    finally:
        restarted.close()


def test_bytes_that_rot_unseen_are_rebuilt_once_a_search_meets_them(
    database: Database, settings: Settings, cx: Context, written: dict[str, UUID]
) -> None:
    """A segment whose bytes rot on the disk, its stamp unchanged: the follower's stamps
    cannot see it; a search that fails on it has the reader check, and
    its note makes the follower rebuild. No client sees a server path."""
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()
        assert run(database, cx, "heron", mode="lexical").degraded == []
        folder = folder_of(database, settings)
        path = damage(folder, "term", "bytes overwritten in place")
        # Rot leaves a file's stamp as it was; no call can set a ctime back, so the follower's
        # record of the file is made to match, as rot would leave it.
        stamp = path.stat()
        follower._checksums.verified[path] = (
            stamp.st_ino,
            stamp.st_size,
            stamp.st_mtime_ns,
            stamp.st_ctime_ns,
        )
        assert not follower.run_once().rebuilt  # unseen
        reader = database.search_runtime.lexical_reader(index_root(settings), lambda: "")
        view = reader.view(cx.actor.workspace_id)
        assert view is not None
        assert reader.failed(view, ValueError("as the engine would raise"))
        searched = run(database, cx, "heron", mode="lexical")
        assert "being rebuilt" not in searched.degraded[0]  # CURRENT still names it
        assert "damaged" in searched.degraded[0] and str(folder) not in searched.degraded[0]
        assert follower.run_once().rebuilt
        assert run(database, cx, "heron", mode="lexical").degraded == []
        assert not (folder / DAMAGED).exists()
    finally:
        follower.close()
