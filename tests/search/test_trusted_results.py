"""Results a user can trust: no rows padded in by meaning alone, a title before a passing
mention, and earlier answers below the sources they quote."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from click.testing import CliRunner

from subspace import commands
from subspace.agents.tools import kb_search
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from subspace.providers.fake import FakeProvider
from subspace.search.derived import below_sources
from subspace.search.floor import ALONE_MARGINS, MODEL_FLOORS, Floor, above_floor, floor_for
from subspace.search.fusion import Fused, Hit
from tests.answers.test_runs import finished
from tests.conftest import make_client
from tests.search_helpers import ids, index, run

GIBBERISH = "xqzvbnm wplkjh"


@pytest.fixture
def notes(database: Database, cx: Context) -> dict[str, Any]:
    """A small workspace of the kind a person keeps: an incident page, a log, some chores."""
    review = commands.create_page(cx, "Incident review: payment gateway timeouts")
    cause = commands.add_node(
        cx, review.id, "The gateway pool of 10 connections was exhausted under the sale load"
    )
    commands.add_node(cx, review.id, "Retries without jitter multiplied the load")
    commands.add_node(cx, review.id, "Checkout answered HTTP 502 for 14 minutes")
    log = commands.create_page(cx, "Team log")
    mention = commands.add_node(
        cx, log.id, "write up the payment gateway timeouts review before Friday"
    )
    commands.add_node(cx, log.id, "order more coffee filters")
    commands.add_node(cx, log.id, "the ferry to Ilha Verde leaves at 7:40 from pier 3")
    chores = commands.create_page(cx, "Chores")
    for text in ("water the tomatoes", "descale the kettle", "renew the bike insurance"):
        commands.add_node(cx, chores.id, text)
    index(database, cx)
    return {"review": review, "cause": cause, "log": log, "mention": mention}


# -- the similarity floor ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_gibberish_finds_nothing_in_every_mode_and_says_so(
    database: Database, cx: Context, notes: dict[str, Any], mode: str
) -> None:
    response = run(database, cx, GIBBERISH, mode=mode)
    assert response.rows == []
    assert response.notes[-1].startswith(f"No matches for \u201c{GIBBERISH}\u201d")
    if mode != "lexical":
        assert response.below_floor > 0
        assert response.min_similarity == MODEL_FLOORS[FakeProvider.model]
        assert "under the similarity floor" in response.notes[-1]


def test_every_surface_says_a_gibberish_search_found_nothing(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    with make_client(database, settings, cx.actor) as client:
        api = client.post("/api/search", json={"query": GIBBERISH}).json()
        sim = client.post(
            "/api/v1/knowledge/search",
            json={"knowledgeBaseIds": str(notes["review"].kb_id), "query": GIBBERISH},
        ).json()
        tool = client.post("/api/tools/kb.search", json={"arguments": {"query": GIBBERISH}})
    assert api["rows"] == []
    assert api["notes"][-1].startswith("No matches for")
    assert sim["success"]
    assert sim["data"]["results"] == []
    assert tool.json()["text"].startswith(f"No matches for \u201c{GIBBERISH}\u201d")
    assert kb_search(cx, database.searcher(FakeProvider()), GIBBERISH).startswith("No matches for")
    printed = CliRunner().invoke(main, ["search", GIBBERISH], env=_cli_env(settings))
    assert printed.exit_code == 0, printed.output
    assert f"No matches for \u201c{GIBBERISH}\u201d" in printed.output
    assert "0 results" in printed.output


def _cli_env(settings: Settings) -> dict[str, str]:
    return {"SUBSPACE_HOME": str(settings.home), "SUBSPACE_DATABASE_URL": settings.database_url}


def test_a_floor_lets_close_meanings_through_and_can_be_set(
    database: Database, cx: Context, notes: dict[str, Any]
) -> None:
    # The floor is a number a request may lower: with none, the nearest rows all come back.
    everything = run(database, cx, GIBBERISH, mode="vector", min_similarity=-1)
    assert everything.rows
    assert everything.below_floor == 0
    # A row near the query passes the floor (trigram vectors: near in spelling).
    near = run(database, cx, "kettle", mode="vector")
    assert [row.passage for row in near.rows] == ["descale the kettle"]


def test_a_row_both_legs_found_survives_a_floor_above_it(
    database: Database, cx: Context, notes: dict[str, Any]
) -> None:
    response = run(database, cx, "coffee filters", min_similarity=1.0)
    row = next(r for r in response.rows if r.passage == "order more coffee filters")
    assert set(row.legs) == {"lexical", "vector"}
    assert row.legs["vector"].score < 1.0
    assert all("lexical" in r.legs for r in response.rows)


def test_more_on_a_page_counts_only_the_rows_it_would_list(
    database: Database, cx: Context, notes: dict[str, Any]
) -> None:
    grouped = run(database, cx, "gateway load", group_by_page=True, limit=20)
    expanded = run(database, cx, "gateway load", limit=100)
    for row in grouped.rows:
        if row.page_id is None:
            continue
        on_page = [r for r in expanded.rows if r.page_id == row.page_id and r.ref != row.ref]
        assert row.more_on_page == len(on_page), (row.title, row.more_on_page, on_page)
    assert any(row.more_on_page for row in grouped.rows)


def test_more_on_a_page_leaves_out_kinds_and_answers_the_search_leaves_out(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Harbor")
    commands.add_node(cx, page.id, "harbor crane inspection", props={"memory": True})
    commands.add_node(cx, page.id, "harbor crane paint")
    commands.add_node(cx, page.id, "harbor crane schedule")
    index(database, cx)
    memories = run(database, cx, "harbor crane", kinds=["memory"], group_by_page=True)
    assert [(row.passage, row.more_on_page) for row in memories.rows] == [
        ("harbor crane inspection", 0)
    ]


# -- titles ------------------------------------------------------------------------------------


def test_the_page_titled_with_the_query_beats_a_passing_mention(
    database: Database, cx: Context, notes: dict[str, Any]
) -> None:
    for mode in ("hybrid", "lexical"):
        response = run(database, cx, "payment gateway timeouts", mode=mode)
        assert ids(response)[:2] == [notes["review"].id, notes["mention"].id], mode


def test_a_bullet_with_the_answer_beats_a_title_sharing_one_word(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Gateway")
    answer = commands.add_node(
        cx, page.id, "gateway timeouts came from retries without backoff and a small pool"
    )
    index(database, cx)
    query = "gateway timeouts retries backoff pool"
    assert ids(run(database, cx, query, mode="lexical"))[0] == answer.id


def test_a_file_is_found_by_its_name_and_the_file_called_so_comes_first(
    database: Database, cx: Context
) -> None:
    budget = commands.upload_file(cx, "Quarterly budget review.txt", b"Totals by team, Q3.")
    other = commands.upload_file(cx, "notes.txt", b"the budget is due with the quarterly numbers")
    page = commands.create_page(cx, "Team log")
    mention = commands.add_node(cx, page.id, "send the quarterly budget review to finance today")
    extract_pending(database, cx.settings)
    index(database, cx)
    for mode in ("hybrid", "lexical"):
        response = run(database, cx, "quarterly budget review", mode=mode)
        assert ids(response)[:2] == [budget.id, mention.id], mode
        assert other.id in ids(response)
    row = run(database, cx, "quarterly budget review", mode="lexical").rows[0]
    assert (row.type, row.ref, row.title) == ("file", f"file:{budget.id}", row.passage)
    assert [row.passage[a:b] for a, b in row.highlights] == ["Quarterly", "budget", "review"]
    # The name's words are found only as the file's, and a filter on files takes its name.
    assert ids(run(database, cx, "totals", kinds=["file"], mode="lexical")) == [budget.id]
    assert ids(run(database, cx, "review", kinds=["file"], mode="lexical")) == [budget.id]
    assert ids(run(database, cx, "review", kinds=["node"], mode="lexical")) == [mention.id]


def test_the_mail_whose_subject_is_the_query_beats_a_passing_mention(
    database: Database, cx: Context
) -> None:
    mail = commands.add_mail(
        cx, message_id="<ferry@x>", subject="Ferry schedule for Ilha Verde",
        body_text="Boats leave at 7:40 and 12:10 from pier 3; the last one returns at 18:00, "
        "weather permitting. Tickets are sold on board, cash only, and bikes travel free on "
        "the early boat. In August an extra boat runs at 15:30 on weekends.",
    )  # fmt: skip
    for n, subject in enumerate(("Lunch on Friday?", "Invoice 2291", "Re: the kettle")):
        commands.add_mail(cx, message_id=f"<{n}@x>", subject=subject, body_text="Sounds good.")
    page = commands.create_page(cx, "Trip")
    mention = commands.add_node(cx, page.id, "ferry schedule: ask Ana")
    for text in ("book the hotel near the harbour", "pack the rain jackets and the maps"):
        commands.add_node(cx, page.id, text)
    index(database, cx)
    for mode in ("hybrid", "lexical"):
        assert ids(run(database, cx, "ferry schedule", mode=mode))[:2] == [mail.id, mention.id], (
            mode
        )


def test_a_bullet_with_every_word_beats_a_file_name_sharing_one(
    database: Database, cx: Context
) -> None:
    commands.upload_file(cx, "gateway.txt", b"Diagram of the gateway.")
    page = commands.create_page(cx, "Incident")
    answer = commands.add_node(
        cx, page.id, "gateway timeouts came from retries without backoff and a small pool"
    )
    extract_pending(database, cx.settings)
    index(database, cx)
    query = "gateway timeouts retries backoff pool"
    assert ids(run(database, cx, query, mode="lexical"))[0] == answer.id


# -- answers -----------------------------------------------------------------------------------


def test_answers_rank_below_their_sources_and_never_cite_answers(
    database: Database, settings: Settings, cx: Context, notes: dict[str, Any]
) -> None:
    answers = []
    with make_client(database, settings, cx.actor) as client:
        for question in ("when does the ferry to Ilha Verde leave?",) * 2:
            asked = client.post(
                "/api/ask", json={"question": question, "strategy": "rag-direct"}
            ).json()
            run_state = finished(client, asked["run_id"])
            assert run_state["status"] == "done", run_state
            answers.append(run_state["answer"])
            index(database, cx)
    source = next(
        r
        for r in run(database, cx, "ferry Ilha Verde", answers="exclude").rows
        if "pier 3" in r.passage
    )
    # The second answer cites the log's bullet, not the first answer's bullets.
    first = {f"node:{bullet['id']}" for bullet in answers[0]}
    second_refs = {ref for bullet in answers[1] for ref in bullet["refs"]}
    assert source.ref in second_refs
    assert not second_refs & first
    # Searching the answer's words: the source first, the answers (marked) after it.
    response = run(database, cx, "ferry Ilha Verde", limit=20)
    assert response.rows[0].ref == source.ref
    assert not response.rows[0].answer
    assert any(row.answer for row in response.rows)
    only = run(database, cx, "ferry Ilha Verde", answers="only", limit=20)
    assert only.rows
    assert all(row.answer for row in only.rows)
    assert source.ref not in {row.ref for row in only.rows}
    excluded = run(database, cx, "ferry Ilha Verde", answers="exclude", limit=20)
    assert excluded.rows
    assert not any(row.answer for row in excluded.rows)


def _fused(name: str, score: float, legs: tuple[str, ...] = ("lexical",)) -> Fused:
    from uuid import NAMESPACE_URL, uuid5

    target = ("node", uuid5(NAMESPACE_URL, name))
    hit = Hit(target, "node", f"node:{target[1]}", target[1], target[1], score)
    return Fused(target, score, {leg: (1, hit) for leg in legs})


def test_minilm_alone_gets_a_margin_and_a_floor_someone_set_none() -> None:
    class MiniLM(FakeProvider):
        model = "onnx:all-MiniLM-L6-v2-int8"

    assert floor_for(MiniLM(), None, None) == Floor(0.30, ALONE_MARGINS[MiniLM.model])
    assert floor_for(MiniLM(), 0.2, None) == Floor(0.2)
    assert floor_for(MiniLM(), 0.2, 0.4) == Floor(0.4)
    assert floor_for(FakeProvider(), None, None) == Floor(0.45)  # spelling: no margin


@pytest.mark.parametrize(
    ("rows", "kept", "applied"),
    [
        # (name, vector similarity, legs that found it)
        ([("a", 0.32, ("vector",)), ("b", 0.36, ("vector",))], ["b"], 0.35),  # meaning alone
        ([("a", 0.32, ("vector",)), ("w", 0.10, ("lexical",))], ["a", "w"], 0.30),  # words too
        ([("a", 0.28, ("vector",)), ("w", 0.10, ("lexical", "vector"))], ["w"], 0.30),
        ([], [], 0.35),
    ],
)
def test_meaning_alone_must_be_surer_than_beside_matching_words(
    rows: list[tuple[str, float, tuple[str, ...]]], kept: list[str], applied: float
) -> None:
    candidates = [_fused(name, score, legs) for name, score, legs in rows]
    floored = above_floor(candidates, Floor(0.30, 0.05))
    by_target = {c.target: name for c, (name, _, _) in zip(candidates, rows, strict=True)}
    assert [by_target[c.target] for c in floored.kept] == kept
    assert floored.floor == pytest.approx(applied)
    assert floored.below == len(rows) - len(kept)


def test_an_answer_waits_for_every_source_it_cites() -> None:
    strong_answer, weak_source, other = _fused("a", 1.0), _fused("s", 0.1), _fused("o", 0.2)
    ordered = below_sources(
        [strong_answer, other, weak_source], {strong_answer.target: {weak_source.target}}
    )
    assert [item.target for item in ordered] == [
        other.target,
        weak_source.target,
        strong_answer.target,
    ]
    # Two answers of equal standing citing each other still come back, last.
    a, b, source = _fused("a2", 0.9), _fused("b2", 0.9), _fused("s2", 0.01)
    looped = below_sources([a, b, source], {a.target: {b.target}, b.target: {a.target}})
    assert [item.target for item in looped] == [source.target, a.target, b.target]
    # The same evidence: the source comes first.
    answer, same = _fused("a3", 0.5), _fused("s3", 0.25)
    assert below_sources([answer, same], {answer.target: set()})[0] is same
    assert replace(answer).answer


def test_explain_lists_the_legs_without_rows_under_the_floor_and_says_why_one_is_absent(
    database: Database, cx: Context, notes: dict[str, Any]
) -> None:
    found = run(database, cx, GIBBERISH, mode="vector", min_similarity=-1).rows[0]
    response = run(database, cx, GIBBERISH, explain=True, explain_target=found.ref)
    assert response.rows == []
    assert response.leg_rows.get("vector") == []
    assert response.absent is not None
    assert not response.absent["shown"]
    assert any("under the similarity floor 0.45" in r for r in response.absent["reasons"])


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("min_similarity", "0.5", "must be a number from -1 to 1, got '0.5'"),
        ("min_similarity", True, "must be a number from -1 to 1, got True"),
        ("min_similarity", 2, "must be a number from -1 to 1, got 2"),
        ("answers", "bogus", "Unknown answers 'bogus'. Use one of: 'include', 'exclude', 'only'"),
    ],
)
def test_the_new_options_refuse_what_they_cannot_mean(
    database: Database, settings: Settings, cx: Context, field: str, value: Any, says: str
) -> None:
    with make_client(database, settings, cx.actor) as client:
        answer = client.post("/api/search", json={"query": "ferry", field: value})
    assert answer.status_code == 422
    assert says in answer.json()["error"]["message"]
