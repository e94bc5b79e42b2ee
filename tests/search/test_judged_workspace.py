"""`subspace eval` on judged workspaces: reading one, resolving its judgments, scoring it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from subspace import commands
from subspace.answers.strategy import Answer, AnswerBullet
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.errors import InvalidInput
from subspace.evaluation.answers import Graded, grade, stated
from subspace.evaluation.judged_workspace import import_judged_workspace, read_judged_workspace
from tests.samples import make_email, make_pdf


def write_set(root: Path, judgments: list[dict[str, Any]], memories: str = "") -> Path:
    """A tiny judged workspace: a page, a PDF and a mail, and the given judgments."""
    pages, files, mail = (root / "workspace" / kind for kind in ("pages", "files", "mail"))
    for folder in (pages, files, mail):
        folder.mkdir(parents=True)
    (pages / "birds.md").write_text(
        "# Kestrels\n\n## Habits\n\n- They hover while hunting voles\n"
        "  - Over open grassland, mostly at dawn\n- Sparrows nest under the river bridge\n"
    )
    (files / "fees.pdf").write_bytes(make_pdf(["Interchange fees for 2027"]))
    (mail / "ferry.eml").write_bytes(make_email("Ferry timetable", "The ferry leaves at 07:10."))
    (root / "memories.txt").write_text(memories)
    (root / "judgments.jsonl").write_text("".join(json.dumps(j) + "\n" for j in judgments))
    return root


def judgment(
    qid: str, query: str, *targets: dict[str, Any], style: str = "title"
) -> dict[str, Any]:
    return {"id": qid, "style": style, "query": query, "relevant": list(targets)}


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ({"page": "Falcons"}, "q1: no page titled 'Falcons'"),
        ({"bullet": "hunting owls"}, "q1: no bullet containing 'hunting owls'"),
        ({"bullet": "the"}, "q1: 2 items match 'the'; name one"),
        ({"memory": "hunting voles"}, "q1: 'hunting voles' is a bullet, judged as a memory"),
        ({"bullet": "river bridge"}, "q1: 'river bridge' is a memory, judged as a bullet"),
        ({"file": "fees.docx"}, "q1: no file named 'fees.docx'"),
        ({"mail": "Ferry"}, "q1: no mail with the subject 'Ferry'"),
    ],
)
def test_a_judgment_that_names_nothing_fails_the_load(
    tmp_path: Path, database: Database, cx: Context, target: dict[str, Any], problem: str
) -> None:
    folder = write_set(tmp_path / "set", [judgment("q1", "kestrels", target)],
                       memories="river bridge\n")  # fmt: skip
    with pytest.raises(InvalidInput) as caught:
        import_judged_workspace(database, cx, read_judged_workspace(folder))
    assert problem in caught.value.message


def test_a_memory_that_names_no_bullet_fails_the_load(
    tmp_path: Path, database: Database, cx: Context
) -> None:
    folder = write_set(tmp_path / "set", [judgment("q1", "kestrels", {"page": "Kestrels"})],
                       memories="herons by the lake\n")  # fmt: skip
    with pytest.raises(InvalidInput, match=re.escape("memories.txt: no bullet containing 'herons")):
        import_judged_workspace(database, cx, read_judged_workspace(folder))


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("not json", "judgments.jsonl:1: not JSON"),
        ('{"id": "q1", "query": "x", "relevant": []}', "expected an object with id, style"),
        (json.dumps(judgment("q1", "x", {"page": "A"}, style="poem")), "style 'poem' is not"),
        (json.dumps(judgment("q1", "qqxzv", {"page": "A"}, style="gibberish")), "must have an"),
        (json.dumps(judgment("q1", "kestrels")), "a title query needs a relevant item"),
        (json.dumps(judgment("q1", "x", {"page": "A", "file": "b"})), "a target is one of"),
        (json.dumps(judgment("q1", "x", {"page": "A", "grade": 0})), "a grade is a whole"),
        (json.dumps({**judgment("q1", "x", {"page": "A"}), "fact": "cargo"}), "a fact is a list"),
        (json.dumps({**judgment("q1", "x", {"page": "A"}), "fact": [" "]}), "a fact is a list"),
        (json.dumps({**judgment("q1", "zz", style="absent"), "fact": ["a"]}), "has no answer"),
        (json.dumps(judgment("q1", "x", {"page": "A"})) + "\n" + json.dumps(judgment(
            "q1", "y", {"page": "A"})), "query ids ['q1'] appear more than once"),
    ],
)  # fmt: skip
def test_a_malformed_judgments_file_is_refused_with_its_line(
    tmp_path: Path, line: str, problem: str
) -> None:
    folder = write_set(tmp_path / "set", [])
    (folder / "judgments.jsonl").write_text(line + "\n")
    with pytest.raises(InvalidInput, match=re.escape(problem)):
        read_judged_workspace(folder)


def test_eval_scores_a_judged_workspace_over_every_kind(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(tmp_path / "home"))
    # Each query's words are in its target alone, so the lexical leg finds it first.
    folder = write_set(tmp_path / "tiny", [
        judgment("q1", "kestrels", {"page": "Kestrels", "grade": 2}),
        judgment("q2", "voles", {"bullet": "hunting voles"}, style="fragment"),
        judgment("q3", "sparrows", {"memory": "Sparrows nest"}, style="fragment"),
        judgment("q4", "interchange", {"file": "fees.pdf"}),
        judgment("q5", "timetable", {"mail": "Ferry timetable"}),
        judgment("q6", "qqxzv wwkjp", style="gibberish"),
    ], memories="Sparrows nest\n")  # fmt: skip
    result = CliRunner().invoke(main, ["eval", str(folder), "--provider", "fake", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dataset"] == "tiny"
    assert report["queries"] == 6
    assert report["expect_empty"] == 1
    assert report["metrics"] == ["success@1", "ndcg@10", "not_empty", "empty"]
    # The seed's statement reads bullets only: it has no arm where every kind is searched.
    assert set(report["arms"]) == {
        *("lexical", "lexical_ts_rank_cd", "vector", "vector_no_floor", "hybrid", "bm25s"),
        "rrf_bm25s_vector",
        "lancedb_hybrid",
    }
    everything = {"success@1": 1.0, "ndcg@10": 1.0, "not_empty": 1.0, "empty": 1.0}
    assert report["arms"]["lexical"] == everything
    assert report["arms"]["bm25s"] == everything  # no word of q6 in any text: no row
    assert report["arms"]["hybrid"]["success@1"] == 1.0
    assert report["missed"]["lexical"] == report["missed"]["hybrid"] == []
    table = CliRunner().invoke(main, ["eval", str(folder), "--provider", "fake"])
    assert table.exit_code == 0, table.output
    assert "success@1" in table.stdout
    assert "1 of the queries are judged to have no answer" in table.stdout
    assert "Missed by hybrid (a wrong first row, or a row where none should be): none." in (
        table.stdout
    )


def test_eval_grades_each_strategys_answers_by_the_fact_and_its_citation(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("SUBSPACE_CHAT_URL", raising=False)
    folder = write_set(tmp_path / "tiny", [
        {**judgment("q1", "when does the ferry leave?", {"mail": "Ferry timetable"},
                    style="question"), "fact": ["at 07:10", "7:10 am"]},
        # No document says what sparrows eat: no answer can hold it.
        {**judgment("q2", "what do sparrows eat?", {"bullet": "Sparrows nest"},
                    style="question"), "fact": ["seeds"]},
        judgment("q3", "kestrels", {"page": "Kestrels"}),
    ])  # fmt: skip
    result = CliRunner().invoke(main, ["eval", str(folder), "--provider", "fake", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["questions"] == 2
    assert report["chat"] == "fake/fake-extractive"
    assert set(report["answers"]) == {"rag", "rag-direct", "rag-pageindex"}
    for strategy, scores in report["answers"].items():
        assert scores == {"holds_fact": 0.5, "cites_fact": 0.5}, strategy
        assert report["unanswered"][strategy] == ["q2"]
    table = CliRunner().invoke(main, ["eval", str(folder), "--provider", "fake"])
    assert "cites a source holding it" in table.stdout


def test_an_answer_that_states_the_fact_without_a_source_holding_it_is_not_cited(
    tmp_path: Path, database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Ferries")
    node = commands.add_node(cx, page.id, "The ferry runs on weekdays.")
    ref = f"node:{node.id}"
    stating = AnswerBullet("The ferry leaves at 07:10.", [ref])
    assert grade(cx, Answer(True, [stating]), ("at 07:10",)) == Graded(True, False)
    commands.edit_node(cx, node.id, "The ferry leaves at 07:10 on weekdays.")
    assert grade(cx, Answer(True, [stating]), ("at 07:10",)) == Graded(True, True)
    # A whole file cited is read whole (its text extracted on import).
    folder = write_set(tmp_path / "set", [judgment("q1", "fees", {"file": "fees.pdf"})])
    (fees,) = import_judged_workspace(database, cx, read_judged_workspace(folder)).qrels["q1"]
    citing_file = AnswerBullet("Interchange fees for 2027 are listed.", [f"file:{fees}"])
    assert grade(cx, Answer(True, [citing_file]), ("fees for 2027",)) == Graded(True, True)
    # An answer that found nothing holds nothing, whatever its closest hits say.
    assert grade(cx, Answer(False, [stating]), ("at 07:10",)) == Graded(False, False)
    assert stated(["seeds", "oats"], "they eat linseeds and oats") == ["oats"]
    assert stated(["cargo  publish"], "run cargo\n  PUBLISH") == ["cargo  publish"]


def test_eval_says_what_a_collection_folder_holds(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["eval", str(tmp_path), "--provider", "fake"])
    assert result.exit_code != 0
    assert "a judged workspace has judgments.jsonl" in result.output
