"""A workspace's searches counted over every web process of the host: alone it may use them
all, beside another workspace its share of the host's cores in all, and a slot held by a
process that died (even by kill -9) is free again."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from subspace import host_shares
from subspace.cancel import Cancel
from subspace.config import Settings
from subspace.errors import CallerGone, TooMany
from subspace.floods import FloodWatch
from subspace.host_shares import SHARED_PER_HOST, HostSlots
from subspace.shares import Shares
from tests.search.test_cancel import eventually
from tests.surfaces.test_lifecycle import Served, home  # noqa: F401 - the fixture


def slots(folder: Path, per_key: int = 4, shared_per_key: int = 1) -> HostSlots:
    """One process's view of the host's slots (two views on one folder are two processes:
    each opens the files itself, and flock tells their locks apart)."""
    return HostSlots(folder, "searches in flight", per_key=per_key, shared_per_key=shared_per_key)


def soon(seconds: float = 0.3) -> float:
    return time.monotonic() + seconds


@contextmanager
def searching(view: HostSlots, key: str) -> Iterator[None]:
    """`key` searching on the host until the block ends, as every process sees: a slot
    taken and given back now and then, as a workspace's searches do."""
    stop = threading.Event()

    def search() -> None:
        while not stop.is_set():
            with view.hold(key, None):
                time.sleep(0.01)
            stop.wait(0.1)

    thread = threading.Thread(target=search)
    thread.start()
    try:
        time.sleep(2 * host_shares.SCAN_S)  # every process has looked again since
        yield
    finally:
        stop.set()
        thread.join()


def test_alone_a_workspace_holds_a_slot_in_every_process_and_beside_another_its_share(
    tmp_path: Path,
) -> None:
    first, second, neighbour = slots(tmp_path), slots(tmp_path), slots(tmp_path)
    with first.hold("a", soon()), second.hold("a", soon()):
        pass  # alone: one in each process, and more
    with searching(neighbour, "b"):
        # Its one share of the host is held in the first process: the second waits past
        # its deadline and says why.
        refused = pytest.raises(TooMany, match="has 1 searches in flight, its share while")
        with first.hold("a", soon()), refused, second.hold("a", soon()):
            pass
        with second.hold("a", soon()):  # given back, it is the second's
            pass


def test_the_slot_of_a_process_killed_mid_search_is_free_at_once(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from pathlib import Path\n"
         "from subspace.host_shares import HostSlots\n"
         f"view = HostSlots(Path({str(tmp_path)!r}), 'searches', per_key=1, shared_per_key=1)\n"
         "with view.hold('a', None):\n"
         "    print('held', flush=True)\n"
         "    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        view = slots(tmp_path, per_key=1)
        with pytest.raises(TooMany), view.hold("a", soon()):
            pass
        holder.kill()  # SIGKILL: nothing of its own gives the slot back
        holder.wait(10)
        with view.hold("a", soon()):
            pass
    finally:
        holder.kill()
        holder.wait(10)


def test_a_waiter_whose_caller_went_away_stops_waiting(tmp_path: Path) -> None:
    view = slots(tmp_path, per_key=1)
    cancel = Cancel()
    with view.hold("a", None):
        threading.Timer(0.1, cancel.cancel).start()
        started = time.monotonic()
        # No deadline: only the cancel ends the wait.
        with pytest.raises(CallerGone), view.hold("a", None, cancel):
            pass
    assert time.monotonic() - started < 5


def test_a_damaged_folder_refuses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Removed while the server runs, the folder is made again; with a file in its way, each
    process counts on its own (and says so) rather than refuse a search."""
    folder = tmp_path / "searches"
    view = slots(folder, per_key=1)
    folder.rmdir()
    with view.hold("a", soon()):
        assert [path.name for path in folder.iterdir()] == ["a.0"]
    shutil.rmtree(folder)
    folder.write_text("not a folder")
    for _ in range(3):
        with view.hold("a", soon()), view.hold("a", soon()):  # uncounted: both go
            pass
    # Said once, not at every search.
    assert caplog.text.count("cannot be locked") == 1
    assert "each process counts its own" in caplog.text


def test_another_workspace_is_active_for_a_while_after_its_last_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_shares, "SCAN_S", 0.0)
    view = slots(tmp_path)
    with view.hold("b", soon()):
        assert view.others_active("a") and not view.others_active("b")
    assert view.others_active("a")  # just gave its slot back
    monkeypatch.setattr(host_shares, "ACTIVE_S", 0.05)
    time.sleep(0.1)
    assert not view.others_active("a")


@contextmanager
def share_held_beside_a_neighbour(folder: Path, workspace: str) -> Iterator[None]:
    """In the block, this test's process holds `workspace`'s whole share of the host while
    another workspace uses it too."""
    view = slots(folder, per_key=SHARED_PER_HOST, shared_per_key=SHARED_PER_HOST)
    with searching(slots(folder), "neighbour"), ExitStack() as held:
        for _ in range(SHARED_PER_HOST):
            held.enter_context(view.hold(workspace, soon()))
        yield


@pytest.mark.slow
def test_two_web_processes_count_a_workspaces_searches_and_connections_together(
    home: Path,  # noqa: F811 - the fixture
    settings: Settings,
) -> None:
    served = Served(home, SUBSPACE_DATABASE_URL=settings.database_url, SUBSPACE_WORKERS="2")
    try:
        with httpx.Client(base_url=served.url, timeout=30) as client:
            client.headers["authorization"] = f"Bearer {served.token}"
            search = {"query": "ferry"}
            assert client.post("/api/search", json=search).status_code == 200
            folder = home / "shares" / "searches"
            (workspace,) = {path.name.rpartition(".")[0] for path in folder.iterdir()}
            # Whichever web process a request reaches, it waits its turn (2 s), then 429.
            for route, body, share, what, ok in (
                ("/api/search", search, "searches", "searches in flight", 200),
                ("/api/pages", {"title": "Trains"}, "connections", "connections in use", 201),
            ):
                with share_held_beside_a_neighbour(home / "shares" / share, workspace):
                    refused = client.post(route, json=body)
                    assert refused.status_code == 429, refused.text
                    assert f"{what}, its share" in refused.json()["error"]["message"]
                assert client.post(route, json=body).status_code == ok
    finally:
        assert served.stop() == 0, served.output


def test_a_request_waiting_for_the_hosts_share_counts_as_waiting(tmp_path: Path) -> None:
    first, second, neighbour = slots(tmp_path), slots(tmp_path), slots(tmp_path)
    watch = FloodWatch(flood_s=0.2)
    took: list[bool] = []

    def ask() -> None:
        with second.hold("a", soon(30), watch=watch):
            took.append(True)

    with searching(neighbour, "b"):
        with first.hold("a", soon()):
            # The host's one share is held in the first process: the second's request waits
            # there, and counts as waiting until it has the slot.
            asker = threading.Thread(target=ask)
            asker.start()
            assert eventually(lambda: watch.flooding("a"))
        asker.join()
    assert took == [True]
    assert not watch.flooding("a")  # it has its slot: nothing waits


def two_processes_shares(folder: Path) -> tuple[Shares, Shares]:
    """Two web processes' searches in flight, counted over the host in `folder`."""
    views = Shares("searches", total=None, per_key=1), Shares("searches", total=None, per_key=1)
    for shares in views:
        shares.count_over_host(folder, processes=2)
        shares.watch.flood_s = 0.2
    return views


def test_a_flood_found_in_one_process_is_a_flood_in_every_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flood's connections reach the processes unevenly: one holding few of them sees its
    queue empty now and then, and takes the flood's word from the process that found it."""
    monkeypatch.setattr(host_shares, "SCAN_S", 0.0)
    first, second = two_processes_shares(tmp_path)

    def ask() -> None:
        with first.hold("a", 30):
            pass

    with second.hold("b", soon()):  # another workspace searches, in the second process
        assert not first.flooding("a") and not second.flooding("a")
        with first.hold("a", soon()):
            # In the first process a request of "a" waits for its slot without a break.
            asker = threading.Thread(target=ask)
            asker.start()
            assert eventually(lambda: first.flooding("a"))
            assert not second.watch.flooding("a")  # nothing of "a" waits in the second
            assert second.flooding("a")
        asker.join()
        monkeypatch.setattr(host_shares, "MARK_FRESH_S", 0.1)
        time.sleep(0.2)  # the first has not found it flooding since
        assert not second.flooding("a")


def test_a_marked_workspace_alone_is_no_flood_and_a_damaged_folder_marks_none(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_shares, "SCAN_S", 0.0)
    first, second = two_processes_shares(tmp_path / "searches")
    assert first.host is not None
    first.host.mark_flooding("a")
    # Alone, a workspace has no one to yield to, whoever marked it.
    assert not second.flooding("a")
    with second.hold("b", soon()):
        assert second.flooding("a")
    shutil.rmtree(tmp_path / "searches")
    (tmp_path / "searches").write_text("not a folder")
    for _ in range(3):  # every request asks: never an error, and the log says it once
        first.host.mark_flooding("a")
        assert not second.flooding("a")
        time.sleep(0.11)  # past the marks' own pace, one a SCAN_S
    said = [r.message for r in caplog.records if "judges floods on its own" in r.message]
    assert [m.split(" cannot be ")[1].split(" ")[0] for m in said] == ["marked", "read"]
