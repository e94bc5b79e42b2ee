"""What people hit on the command line: grep paging, limits and snippets, reading by ref,
and singular counts."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from subspace import commands
from subspace.cli import main
from subspace.context import Context
from subspace.database import Database
from subspace.ingest.worker import extract_pending
from subspace.search.grep import grep
from tests.search_helpers import index


def test_grep_pages_with_a_cursor(runner: CliRunner, cx: Context) -> None:
    page = commands.create_page(cx, "Log")
    for n in range(3):
        commands.add_node(cx, page.id, f"kettle number {n}")
    first = runner.invoke(main, ["grep", "kettle", "--limit", "2"])
    assert first.exit_code == 0, first.output
    assert first.stdout.count("kettle number") == 2
    more = re.search(r"run again with --cursor (\S+)", first.stdout)
    assert more is not None, first.stdout
    rest = runner.invoke(main, ["grep", "kettle", "--limit", "2", "--cursor", more[1]])
    assert rest.exit_code == 0, rest.output
    assert rest.stdout.count("kettle number") == 1
    assert "--cursor" not in rest.stdout
    seen = re.findall(r"kettle number \d", first.stdout + rest.stdout)
    assert sorted(seen) == ["kettle number 0", "kettle number 1", "kettle number 2"]


@pytest.mark.parametrize("limit", ["0", "-1", "501"])
def test_grep_refuses_a_limit_out_of_range(runner: CliRunner, limit: str) -> None:
    result = runner.invoke(main, ["grep", "kettle", "--limit", limit])
    assert result.exit_code == 2
    assert f"{limit} is outside 1 to 500" in result.output


def test_grep_snippets_start_and_end_on_whole_words(cx: Context) -> None:
    page = commands.create_page(cx, "Words")
    # The match sits far enough in that the window starts and ends inside a word.
    text = "alpha " * 30 + "xy needle " + "omega " * 40
    commands.add_node(cx, page.id, text)
    (match,) = grep(cx, "needle").matches
    words = match.snippet.split()
    assert "needle" in words
    assert set(words) <= {"alpha", "xy", "needle", "omega"}, match.snippet
    # A word longer than the window is cut rather than dropped when the match is inside it.
    for n, text in enumerate(
        (
            "z" * 300 + "haystack" + "z" * 300,
            "z" * 200 + "haystack" + "z" * 10 + " tail" * 40,
            "lead " * 15 + "z" * 10 + "haystack" + "z" * 300,
        )
    ):
        other = commands.create_page(cx, f"Long {n}")
        commands.add_node(cx, other.id, text)
    long = grep(cx, "haystack").matches
    assert len(long) == 3, long
    assert all("haystack" in m.snippet for m in long), long


def test_read_takes_the_refs_search_and_grep_print(
    runner: CliRunner, database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Garden Plan")
    node = commands.add_node(cx, page.id, "Prune the quince")
    commands.add_node(cx, page.id, "under it", parent_id=node.id)
    file = commands.upload_file(cx, "tools.txt", b"Secateurs and a saw for the quince.")
    mail = commands.add_mail(
        cx, message_id="<q@x>", subject="Quince delivery", sender="ana@example.com",
        body_text="Arrives Tuesday.",
    )  # fmt: skip
    extract_pending(database, cx.settings)
    index(database, cx)

    def read(spec: str) -> str:
        result = runner.invoke(main, ["read", spec])
        assert result.exit_code == 0, (spec, result.output)
        return result.stdout

    assert read("garden plan").startswith(f"# Garden Plan (page:{page.id})")
    assert read(f"page:{page.id}").startswith("# Garden Plan")
    assert read(str(page.id)).startswith("# Garden Plan")
    assert "- under it" in read(f"node:{node.id}")
    assert "Secateurs and a saw" in read(f"file:{file.id}:0")
    assert read(f"file:{file.id}").startswith(f"# tools.txt (file:{file.id})")
    mail_text = read(f"mail:{mail.id}")
    assert "Quince delivery" in mail_text
    assert "Arrives Tuesday." in mail_text
    # The refs grep prints are readable as they are.
    for line in runner.invoke(main, ["grep", "quince"]).stdout.splitlines():
        ref = line.split(" ", 1)[0]
        assert runner.invoke(main, ["read", ref]).exit_code == 0, ref
    missing = runner.invoke(main, ["read", f"file:{file.id}:7"])
    assert missing.exit_code == 1
    assert "No file chunk" in missing.output


def test_read_refuses_an_empty_title(runner: CliRunner) -> None:
    for empty in ("", "   "):
        result = runner.invoke(main, ["read", empty])
        assert result.exit_code == 1
        assert "The page title is empty" in result.output


def test_one_result_is_singular(runner: CliRunner, database: Database, cx: Context) -> None:
    page = commands.create_page(cx, "Orchard")
    commands.add_node(cx, page.id, "Prune the quince in February")
    index(database, cx)
    result = runner.invoke(main, ["search", "quince", "--mode", "lexical"])
    assert result.exit_code == 0, result.output
    assert "1 result in" in result.stdout
    assert "1 results" not in result.stdout
