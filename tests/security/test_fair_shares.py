"""One workspace's load leaves room for the others: searches in flight are bounded per
workspace, past the bound a search waits its turn and then answers 429."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.api import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import TooMany
from subspace.floods import Precedence
from subspace.keys import create_key
from subspace.search import service
from subspace.shares import Shares
from subspace.workspaces import create_workspace
from tests.search.test_cancel import eventually
from tests.search_helpers import index, run


def _other_workspace(database: Database, cx: Context) -> Context:
    with database.pool.connection() as conn:
        actor = create_workspace(conn, "Neighbour")
    return replace(cx, actor=actor)


def test_a_workspace_at_its_share_waits_while_another_searches(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "SEARCH_WAIT_S", 0.2)
    commands.add_node(cx, commands.create_page(cx, "Ferries").id, "the ferry leaves at nine")
    neighbour = _other_workspace(database, cx)
    commands.add_node(neighbour, commands.create_page(neighbour, "Trains").id, "the ferry too")
    index(database, cx)
    shares = database.search_runtime.searches
    taken = threading.Event()
    done = threading.Event()

    def flood() -> None:  # the workspace's every slot held, as by long searches
        with shares.hold(cx.actor.workspace_id, 1), shares.hold(cx.actor.workspace_id, 1):
            taken.set()
            done.wait(30)

    shares.per_key = 2
    holder = threading.Thread(target=flood)
    holder.start()
    try:
        assert taken.wait(10)
        with pytest.raises(TooMany, match="already has 2 searches in flight"):
            run(database, cx, "ferry", mode="lexical")
        assert [row.passage for row in run(database, neighbour, "ferry", mode="lexical").rows] == [
            "the ferry too"
        ]
    finally:
        done.set()
        holder.join()
    assert run(database, cx, "ferry", mode="lexical").rows  # its turn came back


def test_past_its_share_a_search_answers_429_with_retry_after(
    database: Database, settings: Settings, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "SEARCH_WAIT_S", 0.1)
    with database.pool.connection() as conn:
        _, token = create_key(conn, cx.actor, "flood")
    client = TestClient(create_app(settings, database))
    client.headers["authorization"] = f"Bearer {token}"
    shares = database.search_runtime.searches
    with client, shares.hold(cx.actor.workspace_id, 0):
        shares.per_key = 1
        refused = client.post("/api/search", json={"query": "ferry"})
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "too_many_requests"


def test_beside_another_workspace_a_flood_of_writes_holds_one_connection_per_core(
    database: Database, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    from subspace import context as module

    monkeypatch.setattr(module, "CONNECTION_WAIT_S", 0.2)
    assert cx.connection_shares is not None
    shared = cx.connection_shares.shared_per_key
    assert shared is not None
    neighbour = _other_workspace(database, cx)
    page = commands.create_page(cx, "Busy")
    holding = threading.Barrier(shared + 1)
    release = threading.Event()

    def hold_a_transaction() -> None:
        with cx.transaction():
            holding.wait(10)
            release.wait(10)

    threads = [threading.Thread(target=hold_a_transaction) for _ in range(shared)]
    with neighbour.transaction():  # the neighbour uses the server too
        for thread in threads:
            thread.start()
        holding.wait(10)
        try:
            with pytest.raises(TooMany, match="its share while other workspaces"):
                commands.add_node(cx, page.id, "one more")
            # The neighbour is not held up: its writes go on.
            commands.create_page(neighbour, "Quiet")
        finally:
            release.set()
            for thread in threads:
                thread.join()
    assert commands.add_node(cx, page.id, "its turn again").text == "its turn again"


def _flooding_after(shares: Shares, seconds: float) -> bool:
    """Hold workspace "a"'s one slot for `seconds` while another of its requests waits for
    it; whether "a" floods just before the slot is given back."""

    def ask() -> None:
        with shares.hold("a", 30):
            pass

    with shares.hold("a", 5):
        asker = threading.Thread(target=ask)
        asker.start()
        time.sleep(seconds)
        flooding = shares.flooding("a")
    asker.join()
    return flooding


def test_a_workspace_with_a_request_waiting_without_a_break_floods_and_brief_waits_do_not() -> None:
    shares = Shares("searches in flight", total=None, per_key=1)
    shares.watch.flood_s = 1.0
    # Alone, a workspace has no one to yield to: however long its requests wait, no flood.
    assert not _flooding_after(shares, 1.5)
    with shares.hold("b", 5):  # another workspace searches too
        # Waits of 0.4 s, 1.2 s in all but never 1 s on end, as people's requests queue.
        assert [_flooding_after(shares, 0.4) for _ in range(3)] == [False, False, False]
        assert _flooding_after(shares, 1.5)
        assert not shares.flooding("a")  # nothing waits any more


def test_a_floods_checkpoint_waits_while_another_workspaces_request_runs_in_its_process() -> None:
    precedence = Precedence()
    assert precedence.step_aside("flood", most_s=30) == 0  # none runs: it goes on at once
    with precedence.running("flood"):  # nor does it wait for its own
        assert precedence.step_aside("flood", most_s=30) == 0
    assert precedence.stepped_aside == 0
    running, done = threading.Event(), threading.Event()

    def a_persons_request() -> None:
        with precedence.running("person"):
            running.set()
            done.wait(10)

    person = threading.Thread(target=a_persons_request)
    flood = threading.Thread(target=precedence.step_aside, args=("flood", 30))
    person.start()
    running.wait(10)
    flood.start()
    assert eventually(lambda: precedence.stepped_aside == 1)
    assert flood.is_alive()  # it waits while the person's request runs ...
    done.set()
    flood.join(10)  # ... and goes on when it ends, long before its 30 s
    assert not flood.is_alive()
    person.join()
    assert precedence.runs("person") == 0
    # Beside a person's request that goes on, it waits its bound and no longer.
    with precedence.running("person"):
        bounded = threading.Thread(target=precedence.step_aside, args=("flood", 0.01))
        bounded.start()
        bounded.join(10)
        assert not bounded.is_alive()
    assert precedence.stepped_aside == 2
