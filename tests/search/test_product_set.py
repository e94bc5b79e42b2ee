"""The product set under tests/relevance/product: it loads, and every judgment names one item."""

from __future__ import annotations

from pathlib import Path

from subspace.context import Context
from subspace.database import Database
from subspace.evaluation.judged_workspace import (
    STYLES,
    TARGET_KINDS,
    UNANSWERABLE,
    import_judged_workspace,
    read_judged_workspace,
)
from tests.relevance.documents import FILES, documents

PRODUCT_SET = Path(__file__).resolve().parents[1] / "relevance" / "product"


def test_the_product_set_loads_and_every_judgment_names_one_item(
    database: Database, cx: Context
) -> None:
    judged = read_judged_workspace(PRODUCT_SET)
    loaded = import_judged_workspace(database, cx, judged)  # InvalidInput on any bad name
    assert len(judged.queries) >= 40
    named = sum(len(q.relevant) for q in judged.queries)
    assert sum(len(targets) for targets in loaded.qrels.values()) == named
    assert set(loaded.qrels) | loaded.expect_empty == {q.id for q in judged.queries}
    assert loaded.expect_empty == {q.id for q in judged.queries if q.style in UNANSWERABLE}
    # Every kind is judged somewhere, and every way people type.
    assert {t.kind for q in judged.queries for t in q.relevant} == set(TARGET_KINDS)
    assert {q.style for q in judged.queries} == set(STYLES)
    with cx.transaction() as conn:
        memories = conn.execute(
            "select count(*) as n from kb.nodes where props->'memory' = 'true'::jsonb"
        ).fetchone()
    assert memories is not None
    assert memories["n"] == len(judged.memories)


def test_the_product_sets_documents_are_what_the_generator_builds() -> None:
    for name, data in documents().items():
        assert (FILES / name).read_bytes() == data, (
            f"{name} differs from what tests/relevance/documents.py builds: run "
            "`python -m tests.relevance.documents` and commit the files."
        )
