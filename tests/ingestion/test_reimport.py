"""Importing again: pages and files known by their source path are updated in place (bullets
diffed, ids and embeddings kept), followed when they move, listed when they are gone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from fastapi.testclient import TestClient

from subspace import commands
from subspace.cli import main
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.ingest.worker import extract_pending
from tests.providers import CountingProvider

GUIDE = """# Harbour guide

## Moorings
The east pier takes boats up to twelve metres; book a berth a day ahead.

The west pier is for fishing boats only.

## Fees
A night costs twenty euros, paid at the office.
"""


def run_import(runner: CliRunner, path: Path) -> dict[str, tuple[str, str]]:
    result = runner.invoke(main, ["import", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    return {row["source"]: (row["outcome"], row["detail"]) for row in rows}


def tree(cx: Context, title: str) -> list[tuple[Any, str, int]]:
    """The page's bullets in document order: (id, text, depth)."""
    with cx.transaction() as conn:
        page = next(p for p in queries.list_pages(conn, cx.actor.workspace_id) if p.title == title)
        nodes = queries.get_page_tree(conn, cx.actor.workspace_id, page.id).nodes
    out: list[tuple[Any, str, int]] = []

    def walk(children: list[Any], depth: int) -> None:
        for node in children:
            out.append((node.id, node.text, depth))
            walk(node.children, depth + 1)

    walk(nodes, 0)
    return out


def test_a_changed_folder_is_brought_up_to_date_in_place(
    runner: CliRunner, tmp_path: Path, database: Database, cx: Context
) -> None:
    notes = tmp_path / "notes"
    (notes / "old").mkdir(parents=True)
    (notes / "guide.md").write_text(GUIDE)
    (notes / "list.txt").write_text("milk\neggs\n")
    (notes / "old" / "runbook.html").write_text("<h1>Restart</h1><p>Drain the queue first</p>")
    (notes / "gone.md").write_text("# Gone\n\nSoon deleted.\n")
    first = run_import(runner, notes)
    assert {o for o, _ in first.values()} == {"added"}
    assert set(first) == {"notes/guide.md", "notes/list.txt", "notes/old/runbook.html",
                          "notes/gone.md"}  # fmt: skip
    extract_pending(database, cx.settings)
    provider = CountingProvider()
    EmbeddingsFollower(database, cx.settings, provider).drain()
    before = tree(cx, "Harbour guide")
    with cx.transaction() as conn:
        (runbook,) = queries.list_files(conn, cx.actor.workspace_id)

    edited = GUIDE.replace("twenty euros", "twenty-five euros").replace(
        "The west pier is for fishing boats only.\n", ""
    )
    (notes / "guide.md").write_text(edited + "\n## Water\nTaps at each pier.\n")
    (notes / "list.txt").write_text("milk\neggs\nbread\n")
    (notes / "new").mkdir()
    (notes / "old" / "runbook.html").rename(notes / "new" / "runbook.html")
    (notes / "gone.md").unlink()
    provider.calls.clear()
    second = run_import(runner, notes)
    assert second == {
        "notes/guide.md": ("updated", ""),
        "notes/list.txt": ("updated", ""),
        "notes/new/runbook.html": ("moved", "from notes/old/runbook.html"),
        "notes/gone.md": (
            "missing",
            "its file is gone from the folder; archive it if it is no longer wanted",
        ),
    }
    after = tree(cx, "Harbour guide")
    by_text = {text: node_id for node_id, text, _ in before}
    # Unchanged bullets keep their ids; the edited paragraph is the same bullet, new text.
    assert after[0] == (by_text["Moorings"], "Moorings", 0)
    assert (
        after[1][0]
        == by_text["The east pier takes boats up to twelve metres; book a berth a day ahead."]
    )
    fees = next(item for item in after if item[1].startswith("A night costs"))
    assert fees[0] == by_text["A night costs twenty euros, paid at the office."]
    assert fees[1] == "A night costs twenty-five euros, paid at the office."
    assert "The west pier is for fishing boats only." not in {text for _, text, _ in after}
    assert [text for _, text, depth in after if depth == 0] == ["Moorings", "Fees", "Water"]
    with cx.transaction() as conn:
        pages = queries.list_pages(conn, cx.actor.workspace_id)
        (moved,) = queries.list_files(conn, cx.actor.workspace_id)
    assert sorted(p.title for p in pages) == ["Gone", "Harbour guide", "list"]
    assert (moved.id, moved.source_path) == (runbook.id, "notes/new/runbook.html")

    # Only what changed is embedded again: the edited bullet, the new ones, the list's line.
    EmbeddingsFollower(database, cx.settings, provider).drain()
    assert sorted(provider.texts) == sorted(
        ["A night costs twenty-five euros, paid at the office.", "Water",
         "Taps at each pier.", "bread"]
    )  # fmt: skip

    third = run_import(runner, notes)
    assert {o for o, _ in third.values()} == {"unchanged", "missing"}


def test_a_single_file_is_the_same_item_as_in_its_folder(
    runner: CliRunner, tmp_path: Path, cx: Context
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "guide.md").write_text(GUIDE)
    run_import(runner, notes)
    (notes / "guide.md").write_text(GUIDE + "\n## Showers\nCoins at the office.\n")
    assert run_import(runner, notes / "guide.md") == {"notes/guide.md": ("updated", "")}
    with cx.transaction() as conn:
        assert len(queries.list_pages(conn, cx.actor.workspace_id)) == 1


def test_an_archived_page_is_not_brought_back_by_importing_again(
    runner: CliRunner, tmp_path: Path, cx: Context
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "guide.md").write_text(GUIDE)
    run_import(runner, notes)
    with cx.transaction() as conn:
        (page,) = queries.list_pages(conn, cx.actor.workspace_id)
    commands.archive_page(cx, page.id)
    (notes / "guide.md").write_text(GUIDE + "\nMore.\n")
    outcome, detail = run_import(runner, notes)["notes/guide.md"]
    assert outcome == "skipped"
    assert "restore it" in detail
    with cx.transaction() as conn:
        assert queries.get_page(conn, cx.actor.workspace_id, page.id).archived_at is not None


def test_a_copy_of_an_imported_file_is_not_imported_twice(
    runner: CliRunner, tmp_path: Path, cx: Context
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "guide.md").write_text(GUIDE)
    (notes / "guidebook.md").write_text(GUIDE)
    outcomes = run_import(runner, notes)
    assert outcomes["notes/guidebook.md"] == (
        "unchanged",
        "the same bytes as notes/guide.md, imported already",
    )
    with cx.transaction() as conn:
        assert len(queries.list_pages(conn, cx.actor.workspace_id)) == 1


def test_an_upload_of_the_same_name_updates_that_file(client: TestClient) -> None:
    first = client.post("/api/files", files={"file": ("notes.html", b"<p>first draft</p>")})
    assert first.status_code == 201, first.text
    second = client.post("/api/files", files={"file": ("notes.html", b"<p>second draft</p>")})
    assert second.status_code == 200, second.text
    body = second.json()
    assert (body["id"], body["updated"], body["already_stored"]) == (
        first.json()["id"],
        True,
        False,
    )
    assert body["status"] == "processing"
    other = client.post("/api/files", files={"file": ("other.html", b"<p>second draft</p>")})
    assert other.json()["already_stored"] is True
    assert len(client.get("/api/files").json()) == 1


def test_a_bullet_kept_from_under_a_deleted_parent_survives(cx: Context) -> None:
    from subspace.commands.sources import update_page_from_outline
    from subspace.ingest.outline import OutlineItem

    page = commands.create_page_from_outline(
        cx, "Plan", [OutlineItem("Old heading", [OutlineItem("keep me", [OutlineItem("deep")])])]
    )
    (heading_id, _, _), (keep_id, _, _), (deep_id, _, _) = tree(cx, "Plan")
    items = [OutlineItem("New heading"), OutlineItem("keep me", [OutlineItem("deep")])]
    update_page_from_outline(cx, page.id, "Plan", items, source_sha256="x", source_path="p.md")
    after = tree(cx, "Plan")
    # "Old heading" is replaced by "New heading" (paired: same id), and "keep me" moves up.
    assert after == [
        (heading_id, "New heading", 0),
        (keep_id, "keep me", 0),
        (deep_id, "deep", 1),
    ]
    update_page_from_outline(cx, page.id, "Plan", [OutlineItem("deep")],
                             source_sha256="y", source_path="p.md")  # fmt: skip
    assert tree(cx, "Plan") == [(deep_id, "deep", 0)]


def test_front_matter_becomes_tags_where_the_types_fit(
    runner: CliRunner, tmp_path: Path, cx: Context
) -> None:
    notes = tmp_path / "vault"
    notes.mkdir()
    (notes / "trip.md").write_text(
        "---\ntitle: Lisbon trip\ntags: [travel, '#family']\ndraft: true\nbudget: 1200\n"
        "starts: 2027-04-02\nowner: Ana\npriority: high\nplaces: [Belem, Sintra]\n---\n"
        "# Day one\n\nTram 28 to the castle.\n"
    )
    with cx.transaction() as conn:
        kb = queries.default_knowledge_base(conn, cx.actor.workspace_id).id
    commands.create_tag(cx, "priority", "number", kb_id=kb)  # a text value does not fit it
    run_import(runner, notes)
    with cx.transaction() as conn:
        (page,) = queries.list_pages(conn, cx.actor.workspace_id)
        tags = queries.list_tag_values(conn, cx.actor.workspace_id, "page", page.id)
    assert page.title == "Lisbon trip"
    assert {t["name"]: (t["type"], t["value"]) for t in tags} == {
        "travel": ("boolean", True),
        "family": ("boolean", True),
        "draft": ("boolean", True),
        "budget": ("number", 1200),
        "starts": ("date", "2027-04-02"),
        "owner": ("text", "Ana"),
    }
    # What fits no tag stays on the page, as YAML, first.
    assert (
        tree(cx, "Lisbon trip")[0][1] == "```yaml\npriority: high\nplaces:\n- Belem\n- Sintra\n```"
    )


def test_wikilinks_link_the_pages_they_name_whichever_is_imported_first(
    runner: CliRunner, tmp_path: Path, cx: Context
) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "alpha.md").write_text(
        "# Alpha\n\nSee [[Zulu notes|the zulu page]] and [[Nowhere]].\n"
    )
    (vault / "Zulu notes.md").write_text("Back to [[alpha]].\n")
    run_import(runner, vault)
    with cx.transaction() as conn:
        pages = {p.title: p.id for p in queries.list_pages(conn, cx.actor.workspace_id)}
    assert set(pages) == {"Alpha", "Zulu notes"}
    assert tree(cx, "Alpha")[0][1] == (
        f"See [the zulu page](/p/{pages['Zulu notes']}) and [[Nowhere]]."
    )
    assert tree(cx, "Zulu notes")[0][1] == f"Back to [alpha](/p/{pages['Alpha']})."
    # Importing again finds the pages linked as they are: nothing to update.
    assert {o for o, _ in run_import(runner, vault).values()} == {"unchanged"}
