"""A workspace's BM25 scores are its own: another workspace's writes, however many and however
long, move none of them, in the lexical index and in the delta ranked from Postgres alike."""

from __future__ import annotations

from dataclasses import replace

from subspace import commands
from subspace.context import Context
from subspace.ingest.outline import OutlineItem
from subspace.runtime import Database
from subspace.workspaces import create_workspace
from tests.search_helpers import follow, run

QUERIES = ("tern cliff", "colony", "nesting tern feather", '"tern colony"')


def top_scores(database: Database, cx: Context) -> dict[str, list[tuple[object, float]]]:
    """Each query's top ten rows with the lexical leg's score, bit for bit."""
    found = {}
    for query in QUERIES:
        response = run(database, cx, query, mode="lexical", limit=10)
        assert response.rows, query
        found[query] = [(row.id, row.legs["lexical"].score) for row in response.rows]
    return found


def test_another_workspace_writing_a_thousand_documents_moves_no_score(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Cliffs")
    for n in range(40):
        commands.add_node(cx, page.id, f"tern colony {n} " + "nesting on the cliff " * (n % 5))
    follow(database, cx)
    before = top_scores(database, cx)

    with database.pool.connection() as conn:
        stranger = replace(cx, actor=create_workspace(conn, "Stranger"))
    # Long documents sharing words with B's, and new words: both averages and idf would move.
    outline = [
        OutlineItem(f"tern {n} " + "gull feather " * (20 + n % 40), []) for n in range(1_000)
    ]
    commands.create_page_from_outline(stranger, "Elsewhere", outline)
    # Written but not yet in the index: the stranger's documents are its delta, not ours.
    assert top_scores(database, cx) == before
    follow(database, cx)
    assert top_scores(database, cx) == before
