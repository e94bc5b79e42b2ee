"""Answer runs: asking through the API, the stream of steps, cancelling, a killed process."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.answers import runs
from subspace.answers.strategy import Answer, AnswerBullet, Job
from subspace.background import Background
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.providers.fake import FakeProvider
from subspace.search.request import SearchRequest
from subspace.search.service import search
from subspace.workspaces import create_workspace
from tests.conftest import make_client

ROOT = Path(__file__).resolve().parents[2]


class Quoting:
    """Answers with the passages of a lexical search, one bullet each, citing each hit; waits
    for `gate` (when given) after each bullet, for 10 s at most, or until the run is
    cancelled, as a model's stream would stop."""

    name = "rag-direct"

    def __init__(self, gate: threading.Event | None = None, *, questions: bool = False) -> None:
        self.gate = gate
        self.questions = questions  # also quote the bullets that ask ("/rag …")

    def answer(self, job: Job) -> Answer:
        response = search(
            job.cx, job.searcher, SearchRequest(query=job.question, mode="lexical", limit=3)
        )
        job.progress.step(
            "tool",
            f"kb.search {job.question}: {len(response.rows)} hits",
            {"tool": "kb.search", "hits": len(response.rows)},
        )
        bullets: list[AnswerBullet] = []
        for row in response.rows:
            if (row.passage or "").startswith("/rag") and not self.questions:
                continue  # the asking bullet itself
            bullet = AnswerBullet(row.passage or row.title, [row.ref])
            job.progress.bullet(bullet)
            bullets.append(bullet)
            if self.gate is not None:
                deadline = time.monotonic() + 10
                while not self.gate.wait(0.1) and time.monotonic() < deadline:
                    if job.progress.cancelled():
                        break
        if not bullets:
            return Answer(False, [AnswerBullet(f"I found nothing about {job.question}.", [])])
        return Answer(True, bullets)


def runs_client(
    database: Database, settings: Settings, cx: Context, strategy: Quoting | None = None
) -> TestClient:
    client = make_client(database, settings, cx.actor)
    quoting = strategy or Quoting()
    client.app.state.run_engine_options = {  # type: ignore[attr-defined]
        "strategies": {name: quoting for name in runs.STRATEGY_NAMES}
    }
    return client


def wait_for(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def finished(client: TestClient, run_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        run: dict[str, Any] = client.get(f"/api/runs/{run_id}").json()
        return run if run["status"] in runs.FINISHED else None

    result: dict[str, Any] = wait_for(done)
    return result


def children(cx: Context, node_id: UUID | str) -> list[tuple[str, dict[str, Any]]]:
    with cx.transaction() as conn:
        rows = conn.execute(
            "select text, props from kb.nodes where workspace_id = %s and parent_id = %s "
            "order by position",
            (cx.actor.workspace_id, UUID(str(node_id))),
        ).fetchall()
    return [(row["text"], row["props"]) for row in rows]


@pytest.fixture
def notes(cx: Context) -> dict[str, Any]:
    page = commands.create_page(cx, "Launch")
    beta = commands.add_node(cx, page.id, "The beta ships on Friday after the review.")
    other = commands.add_node(cx, page.id, "Lunch is at noon.")
    return {"page": page, "beta": beta, "other": other}


def test_ask_writes_cited_answer_bullets_under_the_rag_bullet(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    with runs_client(database, settings, cx) as client:
        asked = client.post(
            "/api/ask", json={"question": "  beta ships  ", "page_id": str(notes["page"].id)}
        )
        assert asked.status_code == 202, asked.text
        body = asked.json()
        assert body["status"] == "queued"
        assert body["events"] == f"/api/runs/{body['run_id']}/events"
        run = finished(client, body["run_id"])
    assert run["status"] == "done"
    assert run["found"] is True
    with cx.transaction() as conn:
        asking = queries.get_node(conn, cx.actor.workspace_id, UUID(body["node_id"]))
    assert asking.text == "/rag beta ships"
    assert asking.parent_id is None
    assert asking.props == {"run": body["run_id"]}
    assert asking.page_id == notes["page"].id
    assert children(cx, body["node_id"]) == [
        (
            "The beta ships on Friday after the review.",
            {"refs": [f"node:{notes['beta'].id}"], "run": body["run_id"]},
        )
    ]
    kinds = [step["kind"] for step in run["steps"]]
    assert kinds == ["status", "status", "tool", "bullet", "status"]
    # The asking bullet matches too, but a run searches sources only.
    assert run["steps"][2]["data"] == {"tool": "kb.search", "hits": 1}
    assert [(a["text"], a["refs"]) for a in run["answer"]] == [
        ("The beta ships on Friday after the review.", [f"node:{notes['beta'].id}"])
    ]


def test_a_question_without_a_page_goes_to_a_questions_page_and_a_bullet_is_reused(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    with runs_client(database, settings, cx) as client:
        first = client.post("/api/ask", json={"question": "lunch", "strategy": "rag-direct"}).json()
        second = client.post("/api/ask", json={"question": "beta"}).json()
        finished(client, first["run_id"])
        finished(client, second["run_id"])
        # The UI files the bullet itself, then asks under it: the bullet is the run's.
        filed = commands.add_node(cx, notes["page"].id, "/rag-pageindex beta   ships")
        reused = client.post(
            "/api/ask",
            json={"question": "beta ships", "strategy": "rag-pageindex", "node_id": str(filed.id)},
        ).json()
        finished(client, reused["run_id"])
    assert first["page_id"] == second["page_id"] != str(notes["page"].id)
    with cx.transaction() as conn:
        page = queries.get_page_tree(conn, cx.actor.workspace_id, UUID(first["page_id"]))
    assert page.title == "Questions"
    assert [n.text for n in page.nodes] == ["/rag-direct lunch", "/rag beta"]
    assert reused["node_id"] == str(filed.id)
    # The earlier answer quoting the same note is a hit too.
    under = children(cx, filed.id)
    assert {text for text, _ in under} == {"The beta ships on Friday after the review."}
    assert [f"node:{notes['beta'].id}"] in [props["refs"] for _, props in under]
    assert {props["run"] for _, props in under} == {reused["run_id"]}


def sse_events(
    client: TestClient, run_id: str, last: int | str | None = None
) -> list[tuple[str, str, Any]]:
    headers = {} if last is None else {"last-event-id": str(last)}
    with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join(response.iter_text())
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        events.append((fields.get("id", ""), fields["event"], json.loads(fields["data"])))
    return events


def test_the_event_stream_delivers_steps_bullets_and_done_in_order_and_resumes(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    gate = threading.Event()
    commands.add_node(cx, notes["page"].id, "The beta review is on Thursday.")
    with runs_client(database, settings, cx, Quoting(gate)) as client:
        run_id = client.post("/api/ask", json={"question": "beta"}).json()["run_id"]
        threading.Timer(0.5, gate.set).start()  # the stream is open while bullets come
        events = sse_events(client, run_id)
        assert [(seq, name) for seq, name, _ in events] == [
            ("1", "status"),
            ("2", "status"),
            ("3", "step"),
            ("4", "bullet"),
            ("5", "bullet"),
            ("6", "status"),
            ("", "done"),
        ]
        assert f"node:{notes['beta'].id}" in events[3][2]["refs"] + events[4][2]["refs"]
        assert events[-1][2] == {"status": "done", "found": True}
        resumed = sse_events(client, run_id, last=4)
        assert [(seq, name) for seq, name, _ in resumed] == [
            ("5", "bullet"),
            ("6", "status"),
            ("", "done"),
        ]
        assert sse_events(client, run_id, last=6) == [("", "done", events[-1][2])]
        # An empty Last-Event-ID (the last event had no id) streams from the start.
        assert sse_events(client, run_id, last="") == events
        for wrong in (b"abc", b"-1", "²".encode("latin-1"), b"1" * 10):
            refused = client.get(f"/api/runs/{run_id}/events", headers={"last-event-id": wrong})
            assert refused.status_code == 422, (wrong, refused.text)
            assert "Last-Event-ID" in refused.json()["error"]["message"]


def test_cancel_mid_run_keeps_the_bullets_written_and_stops(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    gate = threading.Event()
    commands.add_node(cx, notes["page"].id, "The beta review is on Thursday.")
    with runs_client(database, settings, cx, Quoting(gate)) as client:
        asked = client.post("/api/ask", json={"question": "beta"}).json()
        run_id = asked["run_id"]
        wait_for(lambda: client.get(f"/api/runs/{run_id}").json()["answer"])
        cancelled = client.post(f"/api/runs/{run_id}/cancel")
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "running"
        assert cancelled.json()["cancel_requested"] is True
        gate.set()
        run = finished(client, run_id)
        assert run["status"] == "cancelled"
        again = client.post(f"/api/runs/{run_id}/cancel")
        assert again.status_code == 200
        assert "already finished (cancelled)" in again.json()["message"]
    assert len(children(cx, asked["node_id"])) == 1
    assert [step["data"].get("status") for step in run["steps"]][-1] == "cancelled"


def test_a_run_whose_process_was_killed_is_marked_failed_on_the_next_start(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    run = runs.enqueue_run(cx, "beta", "rag", page_id=notes["page"].id)
    killed = subprocess.run(
        [sys.executable, "-m", "tests.runs_crash", database.dsn, str(run.id)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -9, killed.stderr
    with database.pool.connection() as conn:
        assert runs.get_run(conn, cx.actor.workspace_id, run.id).status == "running"
    with runs_client(database, settings, cx) as client:
        stopped = finished(client, str(run.id))
    assert stopped["status"] == "failed"
    assert stopped["error"] == runs.STOPPED
    assert [text for text, _ in children(cx, run.node_id)] == [
        "The beta ships on Friday after the review.",
        runs.STOPPED,
    ]


def test_a_run_still_executing_is_not_taken_for_dead(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    run = runs.enqueue_run(cx, "beta", "rag", page_id=notes["page"].id)
    engine = runs.RunEngine(database, settings, None, {"rag": Quoting()})
    claimed = engine.claim()
    assert claimed is not None
    assert claimed.run.id == run.id
    assert runs.reap_stopped(database, settings) == []
    assert engine.execute(claimed).status == "done"
    assert runs.reap_stopped(database, settings) == []


def test_another_workspaces_run_is_not_found(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    with database.pool.connection() as conn:
        theirs = create_workspace(conn, "Other company")
    their_cx = database.context(theirs, settings)
    their_page = commands.create_page(their_cx, "Theirs")
    with runs_client(database, settings, cx) as client:
        run_id = client.post("/api/ask", json={"question": "beta"}).json()["run_id"]
        finished(client, run_id)
        them = make_client(database, settings, theirs)
        assert them.get(f"/api/runs/{run_id}").status_code == 404
        assert them.get(f"/api/runs/{run_id}/events").status_code == 404
        assert them.post(f"/api/runs/{run_id}/cancel").status_code == 404
        on_their_page = client.post(
            "/api/ask", json={"question": "beta", "page_id": str(their_page.id)}
        )
        assert on_their_page.status_code == 404
    assert client.get(f"/api/runs/{uuid4()}").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"question": "   "}, 422, "question is empty"),
        ({"question": "x" * 2001}, 422, "limit is 2,000"),
        ({"question": "a\u0000b"}, 422, "NUL byte"),
        ({"question": "a\ud800b"}, 422, "lone surrogate"),
        ({"question": "beta", "strategy": "rag-everything"}, 422, "strategy"),
        ({"question": "beta", "page_id": str(uuid4())}, 404, "No page"),
        ({"question": "beta", "node_id": str(uuid4())}, 404, "No node"),
    ],
)
def test_bad_questions_are_refused_with_the_reason(
    client: TestClient, body: dict[str, Any], status: int, words: str
) -> None:
    # Escaped as JSON sends it: a lone surrogate cannot be encoded as UTF-8.
    answer = client.post(
        "/api/ask", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    assert words in answer.text


def test_a_deleted_page_takes_no_question(
    client: TestClient, cx: Context, notes: dict[str, Any]
) -> None:
    commands.delete_page(cx, notes["page"].id)
    on_page = client.post("/api/ask", json={"question": "beta", "page_id": str(notes["page"].id)})
    under_node = client.post(
        "/api/ask", json={"question": "beta", "node_id": str(notes["beta"].id)}
    )
    assert (on_page.status_code, under_node.status_code) == (409, 409)
    assert "Restore the page first" in under_node.json()["error"]["message"]
    with cx.transaction() as conn:
        assert conn.execute("select count(*) as n from kb.runs").fetchone()["n"] == 0  # type: ignore[index]


def test_answers_are_searchable_once_indexed(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    commands.add_node(cx, notes["page"].id, "Reviewers sign the beta checklist.")
    with runs_client(database, settings, cx) as client:
        run_id = client.post("/api/ask", json={"question": "beta"}).json()["run_id"]
        answer = finished(client, run_id)["answer"]
    EmbeddingsFollower(database, settings, FakeProvider()).drain()
    searcher = database.searcher(FakeProvider())
    response = search(cx, searcher, SearchRequest(query="reviewers checklist", limit=10))
    found = {row.ref for row in response.rows}
    assert {f"node:{a['id']}" for a in answer} & found


@pytest.mark.parametrize("mode", ["lexical", "vector", "hybrid"])
def test_a_search_for_an_answer_leaves_out_questions_and_answers(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any], mode: str
) -> None:
    """More bullets asking about the beta than a search returns, each matching the question
    better than the source: a run's searches still find the source, in every leg."""
    for _ in range(12):
        runs.enqueue_run(cx, "beta ships", "rag", page_id=notes["page"].id)
    provider = FakeProvider()
    EmbeddingsFollower(database, settings, provider).drain()
    # No similarity floor: the vector leg's own order is what is checked.
    request = SearchRequest(query="beta ships", mode=mode, limit=5, min_similarity=-1)
    searcher = database.searcher(provider)
    asked = search(cx, searcher, request.model_copy(update={"answers": "only"})).rows
    assert [row.passage for row in asked].count("/rag beta ships") == 5
    sources = search(cx, searcher.for_answers(), request).rows
    assert [row.ref for row in sources][:1] == [f"node:{notes['beta'].id}"]
    assert not [row for row in sources if (row.passage or "").startswith("/rag")]


def test_a_bullet_that_asks_is_never_cited_as_its_own_answer(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    engine = runs.RunEngine(database, settings, None, {"rag": Quoting(questions=True)})

    def ask(question: str) -> tuple[runs.Run, list[tuple[str, dict[str, Any]]]]:
        run = runs.enqueue_run(cx, question, "rag", page_id=notes["page"].id)
        claimed = engine.claim(run.id)
        assert claimed is not None
        return engine.execute(claimed), children(cx, run.node_id)

    done, answer = ask("beta ships")
    assert done.found is True
    assert answer == [
        (
            "The beta ships on Friday after the review.",
            {"refs": [f"node:{notes['beta'].id}"], "run": str(done.id)},
        )
    ]
    # Only the bullet asking it holds this word: nothing answers it.
    done, answer = ask("Thursday")
    assert (done.status, done.found) == ("done", False)
    assert answer == [("I found nothing about Thursday.", {"refs": [], "run": str(done.id)})]


def test_a_stream_is_woken_by_the_steps_notifications(
    database: Database,
    settings: Settings,
    cx: Context,
    notes: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from subspace.api.routes import runs as routes

    monkeypatch.setattr(routes, "WOKEN_POLL_S", 120.0)  # only a notification wakes it in time
    gate = threading.Event()
    with runs_client(database, settings, cx, Quoting(gate)) as client:
        run_id = client.post("/api/ask", json={"question": "beta"}).json()["run_id"]
        got: list[Any] = []
        reader = threading.Thread(target=lambda: got.extend(sse_events(client, run_id)))
        reader.start()
        time.sleep(0.5)  # the stream is waiting when the bullet and the end are written
        gate.set()
        reader.join(timeout=30)
        assert not reader.is_alive(), "the stream slept through the run's steps"
    assert [name for _, name, _ in got][-2:] == ["status", "done"]


def test_streams_are_bounded_per_user_per_workspace_and_in_all() -> None:
    from subspace.api.routes.runs import StreamSlots
    from subspace.errors import TooMany

    slots = StreamSlots(per_user=2, per_workspace=3, in_all=4)
    ws, other_ws = uuid4(), uuid4()
    me, colleague, stranger = (ws, uuid4()), (ws, uuid4()), (other_ws, uuid4())
    slots.take(me)
    slots.take(me)
    with pytest.raises(TooMany, match="already follows 2 runs"):
        slots.take(me)
    slots.take(colleague)  # counted per user ...
    with pytest.raises(TooMany, match="workspace already has 3 event streams"):
        slots.take(colleague)  # ... and per workspace
    slots.take(stranger)
    with pytest.raises(TooMany, match="server already serves 4 event streams"):
        slots.take((uuid4(), uuid4()))
    slots.give_back(me)
    slots.take(stranger)  # a slot given back is free again
    slots.give_back(stranger)
    slots.give_back(colleague)
    slots.take(me)


def test_a_stream_past_the_bound_answers_429_with_retry_after(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    from subspace.api.routes.runs import StreamSlots

    with runs_client(database, settings, cx, Quoting(threading.Event())) as client:
        client.app.state.run_streams = StreamSlots(per_user=0)  # type: ignore[attr-defined]
        run_id = client.post("/api/ask", json={"question": "beta"}).json()["run_id"]
        refused = client.get(f"/api/runs/{run_id}/events")
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        assert "already follows 0 runs" in refused.json()["error"]["message"]
        client.post(f"/api/runs/{run_id}/cancel")


def test_a_stream_ends_after_its_lifetime_and_resumes_where_it_stopped(
    database: Database,
    settings: Settings,
    cx: Context,
    notes: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from subspace.api.routes import runs as routes

    monkeypatch.setattr(routes, "STREAM_MAX_S", 1.0)
    gate = threading.Event()
    with runs_client(database, settings, cx, Quoting(gate)) as client:
        run_id = client.post("/api/ask", json={"question": "beta"}).json()["run_id"]
        wait_for(lambda: [s for s in client.get(f"/api/runs/{run_id}").json()["steps"]])
        started = time.monotonic()
        first = sse_events(client, run_id)  # the run waits at its gate: the stream times out
        assert time.monotonic() - started < 10
        assert first
        assert "done" not in [name for _, name, _ in first]
        gate.set()
        rest = sse_events(client, run_id, last=first[-1][0])
    seqs = [int(seq) for seq, _, _ in first + rest if seq]
    assert seqs == sorted(set(seqs)), "resumed with a step sent twice or out of order"
    assert [name for _, name, _ in rest][-1] == "done"


def test_a_server_stopping_mid_run_marks_it_failed_and_says_so(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    gate = threading.Event()
    commands.add_node(cx, notes["page"].id, "The beta review is on Thursday.")
    run = runs.enqueue_run(cx, "beta", "rag", page_id=notes["page"].id)
    engine = runs.RunEngine(database, settings, None, {"rag": Quoting(gate)})
    background = Background()
    background.start_loop("runs", runs.RunWorker(engine, 1))
    wait_for(lambda: children(cx, run.node_id))
    threading.Timer(0.3, gate.set).start()  # the strategy goes on after the stop is asked
    background.stop()
    with database.pool.connection() as conn:
        stopped = runs.get_run(conn, cx.actor.workspace_id, run.id)
    assert (stopped.status, stopped.error) == ("failed", runs.STOPPED)
    assert [text for text, _ in children(cx, run.node_id)][1:] == [runs.STOPPED]


@pytest.mark.parametrize("strategy", ["rag", "rag-pageindex", "rag-direct"])
def test_answers_quote_sources_not_earlier_questions_and_answers(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any], strategy: str
) -> None:
    """Asked again, each strategy still finds the bullet that holds the answer: the earlier
    questions and answers match the words better, but they are not sources."""
    engine = runs.RunEngine(database, settings, None)
    answers = []
    # Enough times that the earlier questions and answers alone would fill the passages.
    for _ in range(6):
        run = runs.enqueue_run(cx, "When does the beta ship?", strategy, page_id=notes["page"].id)
        claimed = engine.claim(run.id)
        assert claimed is not None
        assert engine.execute(claimed).found is True
        answers.append(children(cx, run.node_id))
    beta = f"node:{notes['beta'].id}"
    for answer in answers:
        assert [props["refs"] for _, props in answer] == [[beta]]


def test_a_workspace_that_queued_many_questions_takes_turns_with_the_others(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    from subspace.workspaces import create_workspace

    with database.pool.connection() as conn:
        neighbour = replace(cx, actor=create_workspace(conn, "Neighbour"))
    flood = [runs.enqueue_run(cx, f"beta {n}", "rag", page_id=notes["page"].id) for n in range(3)]
    theirs = runs.enqueue_run(neighbour, "one question", "rag")
    engine = runs.RunEngine(database, settings, None, {"rag": Quoting()})
    first = engine.claim()
    second = engine.claim()  # the flooding workspace has a run going; the other has none
    assert first is not None
    assert second is not None
    try:
        assert [first.run.id, second.run.id] == [flood[0].id, theirs.id]
    finally:
        for claimed in (first, second):
            engine.execute(claimed)
