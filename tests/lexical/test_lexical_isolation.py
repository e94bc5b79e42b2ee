"""A workspace's BM25 scores are its own: another workspace's writes, however many and however
long, move none of them, in the lexical index and in the delta ranked from Postgres alike."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from uuid import uuid4

import pytest

from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.outline import OutlineItem
from subspace.search.lexical.index import follower as follower_module
from subspace.search.lexical.index.follower import LexicalFollower
from subspace.search.lexical.index.layout import (
    CURRENT,
    FORMAT,
    STATE,
    TEXT,
    IndexDocument,
    State,
    index_root,
    source_kinds,
    write_atomically,
)
from subspace.search.lexical.index.reader import LexicalReader, engine_stats
from subspace.search.lexical.index.writer import Writers
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


def test_another_workspaces_writes_keep_this_ones_view(database: Database, cx: Context) -> None:
    """A view is made again only after the follower wrote its own workspace's files: another
    workspace's writes carry it to the new position, same engine reading, so a search beside
    a busy neighbour does not read every source's statistics again."""
    page = commands.create_page(cx, "Cliffs")
    commands.add_node(cx, page.id, "tern colony on the cliff")
    follow(database, cx)
    assert run(database, cx, "tern", mode="lexical").rows  # the process's reader is made
    reader = database.search_runtime.lexical_reader(index_root(cx.settings), lambda: "")
    before = reader.view(cx.actor.workspace_id)
    assert before is not None and before.searchers

    with database.pool.connection() as conn:
        stranger = replace(cx, actor=create_workspace(conn, "Stranger"))
    commands.create_page_from_outline(stranger, "Elsewhere", [OutlineItem("gull feather")])
    follow(database, cx)
    carried = reader.view(cx.actor.workspace_id)
    assert carried is not None and carried.position != before.position
    assert carried.searchers is before.searchers and carried.stats == before.stats

    commands.add_node(cx, page.id, "a second tern colony, longer than the first one")
    follow(database, cx)
    made = reader.view(cx.actor.workspace_id)
    assert made is not None and made.searchers is not carried.searchers
    # Read with the term that served before, the statistics are a full scan's.
    assert made.stats != before.stats
    assert made.stats == {
        source: found[0]
        for source, searcher in made.searchers.items()
        if (found := engine_stats(searcher)) is not None
    }
    assert len(run(database, cx, "tern", mode="lexical").rows) == 2


def test_a_workspaces_first_documents_are_seen_though_committed_before_the_state_lists_them(
    tmp_path: Path,
) -> None:
    """The follower commits a workspace's indexes, then records the position holding them: a
    search between the two sees an empty view, which is not carried past that position."""
    generation = tmp_path / "g1"
    generation.mkdir()
    write_atomically(tmp_path / CURRENT, "g1")
    kinds = source_kinds()

    def record(position: str, workspaces: dict[str, int]) -> None:
        State(FORMAT, "db", kinds, position, workspaces).write(generation / STATE)

    mine = uuid4()
    record("10:10:", {})
    reader = LexicalReader(tmp_path, "db")
    writers = Writers(generation)
    source = next(iter(kinds))
    writers.add(IndexDocument(mine, source, kinds[source][0], uuid4(), uuid4(), uuid4(), 0, (),
                              False, ["tern"], [1]))  # fmt: skip
    writers.commit(None, "db")  # its first documents, not recorded yet
    in_between = reader.view(mine)
    assert in_between is not None and not in_between.searchers
    record("11:11:", writers.workspaces)
    after = reader.view(mine)
    assert after is not None and after.position == "11:11:"
    assert after.searchers[source].doc_freq(TEXT, "tern") == 1
    writers.close()


def test_a_running_follower_checks_every_workspace_in_turn(
    database: Database, settings: Settings, cx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round checks a slice of the workspaces' files, so damage in any one is found within
    workspaces / CHECK_SLICE rounds, and the index is rebuilt."""
    monkeypatch.setattr(follower_module, "CHECK_SLICE", 2)
    tenants = [cx]
    with database.pool.connection() as conn:
        tenants += [replace(cx, actor=create_workspace(conn, f"Tenant {n}")) for n in range(4)]
    for n, tenant in enumerate(tenants):
        commands.add_node(tenant, commands.create_page(tenant, f"Page {n}").id, f"heron {n}")
    follower = LexicalFollower(database, settings)
    try:
        follower.run_once()  # opens: every file checked
        generation = follower.writers.generation if follower.writers else None
        assert generation is not None
        last = sorted(p for p in generation.iterdir() if p.is_dir())[-1]
        (meta := last / "node" / "meta.json").write_text("{ not json")
        assert meta.exists()
        rounds = [follower.run_once().rebuilt for _ in range(3)]  # five workspaces, two a round
        assert rounds.count(True) == 1
    finally:
        follower.close()
