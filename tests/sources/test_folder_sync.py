"""Watched folders: a round reads only what changed, follows moves, archives what went and
restores what came back, on real documents and real file-system changes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from subspace.context import Context
from subspace.database import Database
from subspace.errors import Conflict, Forbidden, InvalidInput
from subspace.sources import model
from subspace.sources.folder import sync_folder


def _distinct(paths: list[Path]) -> list[Path]:
    """One of each content: a copy of a file imported already is not imported again."""
    by_content = {path.read_bytes(): path for path in reversed(paths)}
    return sorted(by_content.values())


# Real documents nobody here wrote: Debian's READMEs and Markdown files.
REAL = _distinct(
    sorted(
        path
        for pattern in ("*/README*", "*/*.md")
        for path in Path("/usr/share/doc").glob(pattern)
        if path.suffix in {"", ".md", ".txt"} and path.is_file() and not path.is_symlink()
    )
)[:30]


def real_folder(tmp_path: Path) -> Path:
    if len(REAL) < 10:
        pytest.skip("too few of Debian's documents under /usr/share/doc on this machine")
    notes = tmp_path / "notes"
    for path in REAL:
        target = notes / path.parent.name / (path.name if path.suffix else path.name + ".txt")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return notes


def pages(cx: Context) -> dict[str, tuple[UUID, bool]]:
    """Each page's source path → (id, whether it is archived)."""
    with cx.transaction() as conn:
        rows = conn.execute(
            "select id, source_path, archived_at is not null as archived from kb.pages "
            "where source_path is not null"
        ).fetchall()
    return {row["source_path"]: (row["id"], row["archived"]) for row in rows}


def node_ids(cx: Context, page_id: UUID) -> dict[str, UUID]:
    with cx.transaction() as conn:
        rows = conn.execute("select id, text from kb.nodes where page_id = %s", (page_id,))
        return {row["text"]: row["id"] for row in rows.fetchall()}


def events_since(cx: Context, position: int) -> list[dict[str, object]]:
    with cx.transaction() as conn:
        return conn.execute(
            "select event, item_id from kb.outbox where id > %s order by id", (position,)
        ).fetchall()


def outbox_position(cx: Context) -> int:
    with cx.transaction() as conn:
        row = conn.execute("select coalesce(max(id), 0) as id from kb.outbox").fetchone()
    return int(row["id"]) if row else 0


def test_a_folder_is_read_once_and_then_only_what_changed(cx: Context, tmp_path: Path) -> None:
    notes = real_folder(tmp_path)
    source = model.add_source(cx, "docs", "folder", model.folder_config(str(notes)))
    first = sync_folder(cx, source)
    files = sorted(p for p in notes.rglob("*") if p.is_file())
    assert first["added"] == len(files) == first["files"]
    before = pages(cx)
    assert len(before) == len(files)

    position = outbox_position(cx)
    assert sync_folder(cx, source) == {"files": len(files), "archived": 0}  # nothing read
    assert events_since(cx, position) == []

    edited = files[3]
    key = edited.relative_to(tmp_path).as_posix()
    kept = node_ids(cx, before[key][0])
    edited.write_text(edited.read_text() + "\n\nA closing line about flywheels.\n")
    counts = sync_folder(cx, source)
    assert counts["updated"] == 1 and "added" not in counts
    changed = events_since(cx, position)
    assert changed and {event["item_id"] for event in changed} == {before[key][0]}
    after = node_ids(cx, before[key][0])
    assert "A closing line about flywheels." in after
    unchanged = {text: i for text, i in kept.items() if text in after}
    assert unchanged and all(after[text] == i for text, i in unchanged.items())  # ids kept


def test_moves_are_followed_deletions_archived_and_returns_restored(
    cx: Context, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    (notes / "plans").mkdir(parents=True)
    (notes / "plans" / "q3.md").write_text("# Q3\n\n- ship the flywheel\n- hire two people\n")
    (notes / "todo.txt").write_text("buy rope\nmend the sail\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    sync_folder(cx, source)
    q3 = pages(cx)["notes/plans/q3.md"][0]

    (notes / "archive").mkdir()
    os.rename(notes / "plans" / "q3.md", notes / "archive" / "q3.md")
    (notes / "todo.txt").unlink()
    counts = sync_folder(cx, source)
    assert (counts["moved"], counts["archived"]) == (1, 1)
    now = pages(cx)
    assert now["notes/archive/q3.md"] == (q3, False)  # the same page, followed
    assert now["notes/todo.txt"][1] is True  # archived, not destroyed

    (notes / "todo.txt").write_text("buy rope\nmend the sail\ncall the harbour master\n")
    counts = sync_folder(cx, source)
    assert counts["restored"] == 1 and counts["updated"] == 1
    assert pages(cx)["notes/todo.txt"][1] is False


def test_an_editors_atomic_save_updates_the_page_in_place(cx: Context, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "log.md").write_text("# Log\n\n- first entry\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    sync_folder(cx, source)
    page = pages(cx)["notes/log.md"][0]
    # Written beside, then renamed over the file, as editors save; the temporary is left
    # half-written when the round runs, as it may be.
    (notes / ".log.md.swp").write_text("binary swap")
    (notes / "log.md~").write_text("# Log\n\n- first entry\n")
    (notes / "log.md.tmp").write_text("# Log\n\n- first entry\n- second entry\n")
    os.replace(notes / "log.md.tmp", notes / "log.md")
    (notes / "log.md.tmp").write_text("# Lo")
    counts = sync_folder(cx, source)
    assert counts["updated"] == 1 and counts["files"] == 1
    assert set(pages(cx)) == {"notes/log.md"} and pages(cx)["notes/log.md"][0] == page


def test_patterns_and_types_choose_the_files(cx: Context, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "drafts").mkdir(parents=True)
    (notes / "a.md").write_text("# A\n\nkept\n")
    (notes / "b.txt").write_text("left out by type\n")
    (notes / "drafts" / "c.md").write_text("# C\n\nexcluded\n")
    (notes / "page.html").write_text("<h1>Also out</h1><p>a file type</p>")
    config = model.folder_config(str(notes), include=["*.md", "*.html"], exclude=["drafts/*"],
                                 types=["page"])  # fmt: skip
    source = model.add_source(cx, "notes", "folder", config)
    assert sync_folder(cx, source)["files"] == 1
    assert set(pages(cx)) == {"notes/a.md"}


def test_a_folder_source_is_checked_before_it_is_kept(cx: Context, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    with pytest.raises(InvalidInput, match="relative"):
        model.folder_config("notes")
    with pytest.raises(InvalidInput, match="not a folder"):
        model.folder_config(str(tmp_path / "missing"))
    with pytest.raises(Forbidden, match="SUBSPACE_FOLDER_ROOTS"):
        model.folder_config(str(notes), roots="")
    with pytest.raises(Forbidden, match="not under"):
        model.folder_config(str(notes), roots=str(tmp_path / "elsewhere"))
    assert model.folder_config(str(notes), roots=str(tmp_path))["path"] == str(notes)
    model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    with pytest.raises(Conflict, match="already follows"):  # the folder, whatever the name
        model.add_source(cx, "notes again", "folder", model.folder_config(str(notes)))
    (tmp_path / "papers").mkdir()
    with pytest.raises(Conflict, match="exists already"):
        model.add_source(cx, "notes", "folder", model.folder_config(str(tmp_path / "papers")))
    (tmp_path / "other" / "notes").mkdir(parents=True)
    with pytest.raises(Conflict, match="folder named 'notes'"):
        model.add_source(cx, "more", "folder", model.folder_config(str(tmp_path / "other/notes")))


def test_a_link_out_of_the_folder_is_not_followed(cx: Context, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's own secret\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "link.txt").symlink_to(secret)
    (notes / "note.txt").write_text("an ordinary note\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    assert sync_folder(cx, source)["files"] == 1
    assert set(pages(cx)) == {"notes/note.txt"}


def test_a_folder_gone_fails_the_round_with_its_reason(
    cx: Context, database: Database, tmp_path: Path
) -> None:
    from subspace.sources.folder import SourceFailed

    notes = tmp_path / "notes"
    notes.mkdir()
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    notes.rmdir()
    with pytest.raises(SourceFailed, match="gone or cannot be read"):
        sync_folder(cx, source)


def test_a_name_that_is_not_utf8_fails_alone(cx: Context, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n\n- first\n")
    with open(os.fsencode(notes) + b"/bad\xff.md", "w") as file:
        file.write("# Bad\n\n- a name in Latin-1\n")
    (notes / "z.md").write_text("# Z\n\n- last\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    counts = sync_folder(cx, source)
    assert (counts["added"], counts["failed"]) == (2, 1)
    with cx.transaction() as conn:
        errors = model.item_errors(conn, source)
    assert [e.key for e in errors] == ["notes/bad\ufffd.md"] and "UTF-8" in errors[0].error


def test_a_folder_that_cannot_be_listed_keeps_its_items(
    cx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    (notes / "team").mkdir(parents=True)
    (notes / "team" / "plan.md").write_text("# Plan\n\n- hire\n")
    (notes / "log.md").write_text("# Log\n\n- day one\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    sync_folder(cx, source)
    listing = os.scandir

    def refusing(path: Any = ".") -> Any:
        if str(path) == str(notes / "team"):
            raise PermissionError(13, "Permission denied", str(path))
        return listing(path)

    monkeypatch.setattr(os, "scandir", refusing)  # as an unreadable or failing disk would
    counts = sync_folder(cx, source)
    assert counts["archived"] == 0 and counts["unreadable folders"] == 1
    assert pages(cx)["notes/team/plan.md"][1] is False
    with cx.transaction() as conn:
        assert [e.key for e in model.item_errors(conn, source)] == ["notes/team/"]


def test_the_last_copy_of_a_file_takes_its_place(cx: Context, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Same\n\n- the same words\n")
    (notes / "b.md").write_text("# Same\n\n- the same words\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    sync_folder(cx, source)
    ((page_id, _),) = pages(cx).values()  # one page: a copy is not stored twice
    (notes / "a.md").unlink()
    counts = sync_folder(cx, source)
    assert counts["moved"] == 1 and counts["archived"] == 0
    assert pages(cx) == {"notes/b.md": (page_id, False)}


def test_a_folder_swapped_for_a_link_elsewhere_is_not_followed(cx: Context, tmp_path: Path) -> None:
    from subspace.sources.folder import SourceFailed

    notes, elsewhere = tmp_path / "notes", tmp_path / "elsewhere"
    notes.mkdir()
    elsewhere.mkdir()
    (notes / "a.md").write_text("# A\n\n- mine\n")
    (elsewhere / "secret.txt").write_text("not to be read\n")
    source = model.add_source(cx, "notes", "folder", model.folder_config(str(notes)))
    sync_folder(cx, source)
    shutil.rmtree(notes)
    notes.symlink_to(elsewhere)
    with pytest.raises(SourceFailed, match="symbolic link"):
        sync_folder(cx, source)
    assert set(pages(cx)) == {"notes/a.md"}


def test_folders_inside_one_another_and_names_like_ids_are_refused(
    cx: Context, tmp_path: Path
) -> None:
    (tmp_path / "notes" / "inner").mkdir(parents=True)
    model.add_source(cx, "notes", "folder", model.folder_config(str(tmp_path / "notes")))
    with pytest.raises(Conflict, match="is inside it"):
        model.add_source(cx, "inner", "folder", model.folder_config(str(tmp_path / "notes/inner")))
    with pytest.raises(Conflict, match="holds it"):
        model.add_source(cx, "all", "folder", model.folder_config(str(tmp_path)))
    with pytest.raises(InvalidInput, match="cannot be an id"):
        model.add_source(cx, str(UUID(int=7)), "folder", model.folder_config(str(tmp_path)))
    with pytest.raises(InvalidInput, match="system's"):
        model.folder_config("/proc/self")


def test_a_copy_in_another_source_takes_nothing_from_the_first(cx: Context, tmp_path: Path) -> None:
    # In folders of different parents: a path of one does not exist under the other's.
    docs_folder, handbook_folder = tmp_path / "a" / "docs", tmp_path / "b" / "handbook"
    docs_folder.mkdir(parents=True)
    handbook_folder.mkdir(parents=True)
    (docs_folder / "readme.md").write_text("# Readme\n\n- how to build it\n")
    (handbook_folder / "copy.md").write_text("# Readme\n\n- how to build it\n")
    docs = model.add_source(cx, "docs", "folder", model.folder_config(str(docs_folder)))
    handbook = model.add_source(cx, "handbook", "folder",
                                model.folder_config(str(handbook_folder)))  # fmt: skip
    sync_folder(cx, docs)
    assert sync_folder(cx, handbook)["unchanged"] == 1  # a copy of docs' page while it lives
    assert set(pages(cx)) == {"docs/readme.md"}  # not moved to the handbook
    (docs_folder / "readme.md").unlink()
    assert sync_folder(cx, docs)["archived"] == 1
    assert sync_folder(cx, handbook)["added"] == 1  # the handbook's copy is an item of its own
    assert {path: archived for path, (_, archived) in pages(cx).items()} == {
        "docs/readme.md": True, "handbook/copy.md": False}  # fmt: skip
