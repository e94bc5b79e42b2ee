"""`subspace import` on a mixed folder: pages, files, mail, failures, and re-import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from subspace.cli import main
from subspace.commands.files import upload_file_once
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from tests.samples import make_docx, make_email, make_mbox, make_pdf


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "knowledge"
    (root / "notes").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "mail").mkdir()
    (root / ".git").mkdir()
    (root / "notes" / "trip.md").write_text(
        "# Lisbon trip\n\n## Packing\n- passport\n  - check expiry\n- charger\n## Plans\n"
        "1. tram 28\n"
    )
    (root / "notes" / "ideas.txt").write_bytes(
        "Idées pour le café\n\nUne terrasse".encode("latin-1")
    )
    (root / "docs" / "guide.pdf").write_bytes(make_pdf(["Badges are issued at reception"]))
    (root / "docs" / "plan.docx").write_bytes(make_docx(["Roadmap for the spring"]))
    (root / "docs" / "runbook.html").write_text("<h1>Restart</h1><p>Drain first</p>")
    (root / "docs" / "broken.pdf").write_bytes(make_pdf(["cut"])[:150])
    (root / "docs" / "photo.png").write_bytes(b"\x89PNG\r\n")
    (root / "mail" / "one.eml").write_bytes(make_email("Hello", "First", message_id="<1@x>"))
    (root / "mail" / "box.mbox").write_bytes(
        make_mbox([make_email("Second", "b", message_id="<2@x>"), b"no headers here\n"])
    )
    (root / ".git" / "config.md").write_text("# ignored")
    return root


def counts(database: Database) -> dict[str, int]:
    with database.pool.connection() as conn:
        row = conn.execute(
            "select (select count(*) from kb.pages) as pages,"
            " (select count(*) from kb.nodes) as nodes,"
            " (select count(*) from kb.files) as files,"
            " (select count(*) from kb.mail) as mail,"
            " (select count(*) from kb.outbox) as events"
        ).fetchone()
    assert row is not None
    return dict(row)


def test_import_a_mixed_folder_then_again(
    runner: CliRunner, folder: Path, database: Database, settings: Settings
) -> None:
    result = runner.invoke(main, ["import", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    outcomes = {row["source"]: (row["outcome"], row["detail"]) for row in report["rows"]}
    assert outcomes["knowledge/notes/trip.md"] == ("added", "")
    assert outcomes["knowledge/docs/guide.pdf"] == ("added", "")
    assert outcomes["knowledge/docs/broken.pdf"][0] == "failed"
    assert "could not be read" in outcomes["knowledge/docs/broken.pdf"][1]
    assert outcomes["knowledge/docs/photo.png"] == ("skipped", ".png files are not read")
    assert outcomes["knowledge/mail/box.mbox#2"] == ("failed", "the message has no headers")
    assert not any(".git" in source for source in outcomes)
    assert report["counts"] == {"added": 7, "failed": 2, "skipped": 1}

    cx = database.default_context(settings)
    with cx.transaction() as conn:
        pages = {p.title: p for p in queries.list_pages(conn, cx.actor.workspace_id)}
        trip = queries.get_page_tree(conn, cx.actor.workspace_id, pages["Lisbon trip"].id)
        files = {f.name: f for f in queries.list_files(conn, cx.actor.workspace_id)}
    assert set(pages) == {"Lisbon trip", "ideas"}
    packing = trip.nodes[0]
    assert packing.text == "Packing"
    assert [c.text for c in packing.children] == ["passport", "charger"]
    assert packing.children[0].children[0].text == "check expiry"
    assert {name: f.status for name, f in files.items()} == {
        "guide.pdf": "ready",
        "plan.docx": "ready",
        "runbook.html": "ready",
        "broken.pdf": "failed",
    }
    before = counts(database)
    again = runner.invoke(main, ["import", str(folder), "--json"])
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    # A file stored before whose text still cannot be read is reported failed, not duplicate.
    assert second["counts"] == {"unchanged": 7, "failed": 2, "skipped": 1}
    outcomes = {row["source"]: (row["outcome"], row["detail"]) for row in second["rows"]}
    assert outcomes["knowledge/docs/broken.pdf"][0] == "failed"
    assert "could not be read" in outcomes["knowledge/docs/broken.pdf"][1]
    assert counts(database) == before


def test_import_into_a_named_knowledge_base_with_a_table(
    runner: CliRunner, folder: Path, database: Database, settings: Settings
) -> None:
    result = runner.invoke(main, ["import", str(folder / "notes" / "trip.md"), "--kb", "Travel"])
    assert result.exit_code == 0, result.output
    assert "Import" in result.stdout
    assert "total" in result.stdout
    cx = database.default_context(settings)
    with cx.transaction() as conn:
        kbs = {k.name: k.id for k in queries.list_knowledge_bases(conn, cx.actor.workspace_id)}
        pages = queries.list_pages(conn, cx.actor.workspace_id, kb_id=kbs["Travel"])
    assert [p.title for p in pages] == ["Lisbon trip"]
    failed = runner.invoke(main, ["import", str(folder / "docs")])
    assert "broken.pdf" in failed.stdout
    assert "could not be read" in failed.stdout


def test_import_of_a_missing_path_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(main, ["import", "/no/such/folder"])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_plain_text_keeps_its_short_lines_and_markdown_its_paragraphs(
    runner: CliRunner, tmp_path: Path, database: Database, settings: Settings
) -> None:
    (tmp_path / "groceries.txt").write_text("milk\neggs\n\n  bread  \nTODO: call the bakery\n")
    wrapped = "The keeper trims the wick at dusk and\nwinds the clockwork before the first ship\n"
    (tmp_path / "keeper.txt").write_text(wrapped + "\nA second paragraph.\n")
    (tmp_path / "prose.md").write_text("one line\nof the same paragraph\n\nanother\n")
    result = runner.invoke(main, ["import", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    cx = database.default_context(settings)
    with cx.transaction() as conn:
        pages = {p.title: p for p in queries.list_pages(conn, cx.actor.workspace_id)}
        text = queries.get_page_tree(conn, cx.actor.workspace_id, pages["groceries"].id)
        prose = queries.get_page_tree(conn, cx.actor.workspace_id, pages["prose"].id)
        keeper = queries.get_page_tree(conn, cx.actor.workspace_id, pages["keeper"].id)
    assert [n.text for n in text.nodes] == ["milk", "eggs", "bread", "TODO: call the bakery"]
    assert [n.text for n in keeper.nodes] == [
        "The keeper trims the wick at dusk and winds the clockwork before the first ship",
        "A second paragraph.",
    ]
    assert [n.text for n in prose.nodes] == ["one line of the same paragraph", "another"]


def test_the_same_bytes_are_one_file_whatever_the_name_or_the_way_in(
    runner: CliRunner, database: Database, cx: Context, tmp_path: Path
) -> None:
    data = make_docx(["Ferry timetable for the winter season"])
    first = tmp_path / "one"
    first.mkdir()
    (first / "timetable.docx").write_bytes(data)
    assert runner.invoke(main, ["import", str(first)]).exit_code == 0
    renamed = tmp_path / "two"
    renamed.mkdir()
    (renamed / "timetable (copy).docx").write_bytes(data)
    result = runner.invoke(main, ["import", str(renamed), "--json"])
    assert json.loads(result.output)["counts"]["unchanged"] == 1
    stored, what = upload_file_once(cx, "another-name.docx", data)
    assert what == "existing"
    assert stored.name == "timetable.docx"
    assert counts(database)["files"] == 1


def test_an_item_the_database_refuses_fails_alone_and_imports_next_time(
    runner: CliRunner,
    folder: Path,
    database: Database,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The mail table is locked by another session and the import's sessions wait 0.3 s for
    a lock at most: the messages fail (the database refused them), the rest is imported,
    and the command ends with its report instead of a traceback."""
    params = conninfo_to_dict(settings.database_url)
    params["options"] = "-c lock_timeout=300"
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", make_conninfo(**params))  # type: ignore[arg-type]
    with database.pool.connection() as blocker, blocker.transaction():
        blocker.execute("lock table kb.mail in share row exclusive mode")
        result = runner.invoke(main, ["import", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    outcomes = {
        row["source"]: (row["outcome"], row["detail"]) for row in json.loads(result.stdout)["rows"]
    }
    assert outcomes["knowledge/mail/one.eml"] == (
        "failed",
        "the database refused it (LockNotAvailable); import again to retry",
    )
    assert outcomes["knowledge/notes/trip.md"] == ("added", "")
    again = runner.invoke(main, ["import", str(folder), "--json"])
    retried = {row["source"]: row["outcome"] for row in json.loads(again.stdout)["rows"]}
    assert retried["knowledge/mail/one.eml"] == "added"
    assert retried["knowledge/notes/trip.md"] == "unchanged"


def test_the_report_prints_a_long_name_whole_and_names_what_is_not_read(
    runner: CliRunner, tmp_path: Path
) -> None:
    name = "quarterly-report-of-the-payments-team-for-the-board-with-every-appendix-" + "x" * 40
    (tmp_path / f"{name}.xyz").write_bytes(b"\x00\x01")
    (tmp_path / "LICENSE").write_text(
        "MIT License\n\nPermission is hereby granted, free of charge."
    )
    (tmp_path / "core").write_bytes(b"\x7fELF\x02\x01\x00\x00")
    result = runner.invoke(main, ["import", str(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("source "))
    width = lines[header].index("kind")
    table = lines[
        header + 1 : next(i for i, line in enumerate(lines) if line.startswith("Import "))
    ]
    # The table folds a long name over lines, in its own column.
    assert f"{name}.xyz" in "".join(line[:width].strip() for line in table)
    reasons = " ".join(" ".join(line[width:].split()) for line in table)
    assert ".xyz files are not read" in reasons
    assert "binary files without an extension are not read" in reasons
    # A file without an extension that holds text (README, LICENSE, NEWS) is read as text.
    listed = json.loads(runner.invoke(main, ["import", str(tmp_path), "--json"]).stdout)
    (license,) = [r for r in listed["rows"] if r["source"].endswith("/LICENSE")]
    assert (license["kind"], license["outcome"]) == ("page", "unchanged")
    found = runner.invoke(main, ["search", "permission hereby granted", "--json"])
    assert json.loads(found.stdout)["rows"][0]["title"] == "LICENSE"
