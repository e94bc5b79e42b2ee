"""`subspace eval`: metrics, the typo perturbation, and a small collection end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from subspace.cli import main
from subspace.config import Settings
from subspace.errors import InvalidInput
from subspace.evaluation.beir import add_typos, load_collection
from subspace.evaluation.metrics import evaluate, mrr_at, ndcg_at, recall_at, rrf, success_at


def test_metrics_by_hand() -> None:
    relevant = {"a": 1, "c": 2}
    ranked = ["b", "a", "c"]
    dcg = 1 / 2**0 * 0 + 1 / 1.5849625007211562 + 2 / 2.0
    idcg = 2 / 1.0 + 1 / 1.5849625007211562
    assert ndcg_at(ranked, relevant) == pytest.approx(dcg / idcg)
    assert recall_at(ranked, relevant, k=2) == 0.5
    assert mrr_at(ranked, relevant) == 0.5
    assert evaluate({"q": ranked}, {"q": relevant, "empty": {}})["mrr@10"] == 0.5
    assert rrf([["x", "y"], ["y", "z"]]) == ["y", "x", "z"]


def test_success_at_counts_any_grade_in_the_first_k() -> None:
    assert success_at(["b", "a"], {"a": 1}) == 0.0
    assert success_at(["b", "a"], {"a": 1}, k=2) == 1.0
    assert success_at(["b", "a"], {"a": 0, "b": 2}) == 1.0
    assert success_at(["a"], {"a": 0}) == 0.0  # judged, but not relevant
    assert success_at([], {"a": 1}) == 0.0


def test_answerable_and_empty_queries_are_scored_apart() -> None:
    qrels = {"q1": {"a": 2}, "q2": {"b": 1}, "q3": {"b": 1, "d": 2}, "q4": {"a": 1}}
    runs = {
        "q1": ["a"],  # found first
        "q2": [],  # nothing came back
        "q3": ["c", "b"],  # the grade-1 document second, the grade-2 one missed
        "q4": ["z"],  # a row, but not a relevant one
        "n1": [],  # judged to have no answer: right to be empty
        "n2": ["x"],  # judged to have no answer, yet a row came back
        "n3": [],
    }
    scores = evaluate(runs, qrels, ["success@1", "ndcg@10", "not_empty", "empty"],
                      expect_empty={"n1", "n2", "n3"})  # fmt: skip
    q3_ndcg = (1 / math.log2(3)) / (2 / math.log2(2) + 1 / math.log2(3))
    assert scores == {
        "success@1": 0.25,  # only q1; the queries judged empty are not averaged in
        "ndcg@10": round((1 + 0 + q3_ndcg + 0) / 4, 4),
        "not_empty": 0.75,  # q1, q3 and q4
        "empty": round(2 / 3, 4),  # n1 and n3
    }
    # Without queries judged empty there is nothing to average: 0.0, as for no judged query.
    assert evaluate(runs, qrels, ["empty"]) == {"empty": 0.0}
    assert evaluate({}, {}, ["success@1"]) == {"success@1": 0.0}


def test_typos_are_deterministic_and_keep_the_ends() -> None:
    text = "Vitamin supplementation improves bone mineral density in elderly patients"
    noisy = add_typos(text)
    assert noisy == add_typos(text)
    assert noisy != text
    for before, after in zip(text.split(), noisy.split(), strict=True):
        assert sorted(before) == sorted(after)
        assert before[0] == after[0]
        assert before[-1] == after[-1]
        assert sum(x != y for x, y in zip(before, after, strict=True)) in (0, 2)


def write_collection(root: Path) -> Path:
    docs = [
        ("d1", "Kestrels", "Kestrels hover while hunting voles over open grassland."),
        ("d2", "Ferries", "The harbour ferry crosses the river every twenty minutes."),
        ("d3", "Bread", "Sourdough needs a lively starter and a long cold proof."),
        ("d4", "Bone", "Vitamin D supplementation raises bone mineral density in adults."),
    ]
    root.mkdir()
    (root / "qrels").mkdir()
    with (root / "corpus.jsonl").open("w") as f:
        for doc_id, title, text in docs:
            f.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
    queries = [("q1", "hovering birds hunting voles"), ("q2", "vitamin d and bone density"),
               ("q3", "unjudged question")]  # fmt: skip
    with (root / "queries.jsonl").open("w") as f:
        for qid, text in queries:
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td4\t1\n")
    return root


@pytest.fixture
def dataset(tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tiny collection, with `subspace eval` pointed at the tests' Postgres and a home of
    its own."""
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(tmp_path / "home"))
    return write_collection(tmp_path / "tiny")


def eval_json(dataset: Path, *options: str) -> dict[str, Any]:
    """`subspace eval DATASET --json` with the fake provider: its report."""
    result = CliRunner().invoke(
        main, ["eval", str(dataset), "--provider", "fake", "--json", *options]
    )
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def eval_table(dataset: Path) -> str:
    """`subspace eval DATASET` with the fake provider: its printed tables."""
    result = CliRunner().invoke(main, ["eval", str(dataset), "--provider", "fake"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_collection_needs_its_three_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"corpus\.jsonl"):
        load_collection(tmp_path)
    collection = load_collection(write_collection(tmp_path / "tiny"))
    assert set(collection.queries) == {"q1", "q2"}
    assert len(collection.corpus) == 4


@pytest.mark.parametrize(
    ("corpus", "refusal"),
    [
        ('{"_id": "d1", "text": "one"}\n{"_id": "d1", "text": "two"}\n',
         "corpus.jsonl line 2 repeats the _id 'd1' of line 1"),
        ('{"_id": "d1", "text": "one"}\n{"_id": "d2", "text": ["two"]}\n',
         "corpus.jsonl line 2: text must be text, not list"),
        ('{"_id": "d1", "text": "one"\n', "corpus.jsonl line 1 is not JSON"),
        ('["d1", "one"]\n', "corpus.jsonl line 1 is not a JSON object"),
        ('{"title": "one"}\n', "corpus.jsonl line 1 has no _id"),
        ('[' * 100_000 + '\n', "corpus.jsonl line 1 is not JSON"),
    ],
)  # fmt: skip
def test_a_collection_that_breaks_the_layout_is_refused_by_line(
    tmp_path: Path, corpus: str, refusal: str
) -> None:
    dataset = write_collection(tmp_path / "tiny")
    (dataset / "corpus.jsonl").write_text(corpus)
    with pytest.raises(InvalidInput) as refused:
        load_collection(dataset)
    assert refusal in refused.value.message


def test_a_collection_reads_a_byte_order_mark_blank_lines_and_refuses_bad_grades(
    tmp_path: Path,
) -> None:
    dataset = write_collection(tmp_path / "tiny")
    corpus = dataset / "corpus.jsonl"
    corpus.write_text("\ufeff" + corpus.read_text().replace("\n", "\n\n"), encoding="utf-8")
    assert list(load_collection(dataset).corpus) == ["d1", "d2", "d3", "d4"]
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\tyes\n")
    with pytest.raises(InvalidInput, match=r"test\.tsv line 2: score must be a whole number"):
        load_collection(dataset)
    (dataset / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    with pytest.raises(InvalidInput, match="must start with the header"):
        load_collection(dataset)
    corpus.write_bytes(b'{"_id": "d1", "text": "caf\xe9"}\n')
    with pytest.raises(InvalidInput, match="not UTF-8"):
        load_collection(dataset)


def test_eval_end_to_end(dataset: Path) -> None:
    out = dataset.parent / "report.md"
    report = eval_json(dataset, "--out", str(out))
    assert report["dataset"] == "tiny"
    assert report["queries"] == 2
    assert set(report["arms"]) == {
        *("lexical", "lexical_ts_rank_cd", "vector", "vector_no_floor", "hybrid", "bm25s"),
        "rrf_bm25s_vector",
        *("seed_lexical", "lancedb_hybrid"),
    }
    assert report["arms"]["lexical"] == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}
    assert report["arms"]["bm25s"]["ndcg@10"] == 1.0
    assert report["arms"]["lancedb_hybrid"]["recall@100"] == 1.0
    # Every word required: q2's document has them all, q1's lacks "birds".
    assert report["arms"]["seed_lexical"]["recall@100"] == 0.5
    assert "| lexical | 1.000 |" in out.read_text()
    assert eval_json(dataset)["arms"] == report["arms"]  # cached vectors, same figures


def test_eval_runs_queries_over_the_query_limit(dataset: Path) -> None:
    long_query = " ".join(["vitamin d and bone density"] * 80)  # 2,159 characters
    assert len(long_query) > Settings().max_query_chars
    with (dataset / "queries.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "q4", "text": long_query}) + "\n")
    with (dataset / "qrels" / "test.tsv").open("a") as f:
        f.write("q4\td4\t1\n")
    report = eval_json(dataset)
    assert report["queries"] == 3
    assert report["long_queries"] == 1
    assert report["cut_documents"] == 0
    assert report["arms"]["lexical"]["recall@100"] == 1.0  # the long query found d4 too
    assert "1 of the queries are longer than SUBSPACE_MAX_QUERY_CHARS (2,000)" in eval_table(
        dataset
    )


def test_a_query_that_is_a_document_is_not_answered_by_itself(dataset: Path) -> None:
    # As in ArguAna: the query is an argument of the corpus, under the query's id.
    with (dataset / "corpus.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "q2", "text": "Vitamin D and bone density."}) + "\n")
    report = eval_json(dataset)
    assert report["own_documents"] == 1
    for arm in ("lexical", "hybrid", "bm25s", "lancedb_hybrid"):
        assert report["arms"][arm]["mrr@10"] == 1.0, arm  # its own text would be first
    assert "1 of the queries are documents of the corpus" in eval_table(dataset)


def test_eval_titled_finds_a_document_by_its_title_and_tries_title_weights(dataset: Path) -> None:
    # "bread" is only d3's title once the title is not copied into the bullet.
    (dataset / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "bread"}) + "\n")
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    report = eval_json(dataset, "--titled")
    assert report["titled"]
    assert report["arms"]["lexical"]["mrr@10"] == 1.0
    assert report["arms"]["lexical_title_weight_2"]["mrr@10"] == 1.0


def test_eval_keeps_documents_with_the_same_text_and_counts_an_empty_one_unfound(
    dataset: Path,
) -> None:
    """Classic collections hold both: two ids with the same text are each found, and an
    empty document is one that nothing can find."""
    with (dataset / "corpus.jsonl").open("a") as f:
        same = "Kestrels hover while hunting voles over open grassland."
        f.write(json.dumps({"_id": "d5", "title": "Kestrels", "text": same}) + "\n")
        f.write(json.dumps({"_id": "d6", "title": "", "text": ""}) + "\n")
        f.write(json.dumps({"_id": "d7", "title": "Long", "text": "word " * 21_000}) + "\n")
    with (dataset / "queries.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "q4", "text": "an empty document"}) + "\n")
    with (dataset / "qrels" / "test.tsv").open("a") as f:
        f.write("q1\td5\t1\nq4\td6\t1\n")
    report = eval_json(dataset)
    assert report["queries"] == 3
    lexical = report["arms"]["lexical"]
    # q1 finds both of its documents, q2 its one; nothing finds q4's empty document.
    assert lexical["recall@100"] == 0.6667
    assert report["arms"]["bm25s"]["recall@100"] == 0.6667
    assert report["arms"]["lancedb_hybrid"]["recall@100"] == 0.6667
    assert report["cut_documents"] == 1  # d7, longer than a bullet may be
