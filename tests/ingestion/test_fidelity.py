"""Real documents read faithfully: the real set (tests/relevance/real, 35 documents others wrote)
imported as `subspace import` imports a folder, then checked for what a faithful reading never
shows, and three of them against outlines checked by eye."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from subspace.cli import main
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.ingest.extract import ExtractLimits, extract

REAL = Path(__file__).parents[1] / "relevance" / "real"
EXPECTED = json.loads((REAL / "expected_outlines.json").read_text())
LIMITS = ExtractLimits(5_000_000, 2_000, 200 << 20, 5_000, 512)

UNDERLINE = re.compile(r"^\s*([=\-~^*#])\1{2,}\s*$")
HTML_TAG = re.compile(r"</?(?:a|img|p|div|span|br)\b[^>]*>|<!--", re.I)
BLOCKS_KEPT_AS_WRITTEN = ("```", "````", "|")  # code, tables and YAML keep their lines
# What the Rust book's menu and help say, and the other generators' navigation panels.
NAVIGATION = ("Coal", "Navy", "Ayu", "hide this help", "Print this book", "Next: ", "Up: ",
              "Table of contents", "Previous chapter")  # fmt: skip


def walk(nodes: list[Any], depth: int = 0) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in nodes:
        out.append((depth, node.text))
        out.extend(walk(node.children, depth + 1))
    return out


@pytest.fixture
def imported(runner: CliRunner, database: Database, cx: Context) -> dict[str, Any]:
    result = runner.invoke(main, ["import", str(REAL / "workspace"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    ws = cx.actor.workspace_id
    with cx.transaction() as conn:
        pages = queries.list_pages(conn, ws)
        trees = {p.source_path: queries.get_page_tree(conn, ws, p.id) for p in pages}
        files = {f.name: f for f in queries.list_files(conn, ws)}
        texts = {
            row["name"]: row["text"]
            for row in conn.execute(
                "select f.name, t.text from kb.files f join search.file_text t "
                "on t.workspace_id = f.workspace_id and t.file_id = f.id where f.workspace_id = %s",
                (ws,),
            ).fetchall()
        }
        mail = {m.subject: m for m in queries.list_mail(conn, ws)}
    return {"report": report, "trees": trees, "files": files, "texts": texts, "mail": mail}


def test_the_real_set_is_read_faithfully(imported: dict[str, Any]) -> None:
    report = imported["report"]
    assert {row["outcome"] for row in report["rows"]} == {"added"}, report["rows"]
    trees, files, texts = imported["trees"], imported["files"], imported["texts"]
    assert len(trees) == 14
    for path, tree in trees.items():
        assert tree.title.strip(), path
        for _depth, text in walk(tree.nodes):
            where = f"{path}: {text[:80]!r}"
            assert not UNDERLINE.match(text), where
            assert not HTML_TAG.search(text), where
            if not text.startswith(BLOCKS_KEPT_AS_WRITTEN):
                assert "\n" not in text, where  # a paragraph is one line
    for name, stored in files.items():
        assert stored.status == "ready", (name, stored.status_reason)
        if name.endswith((".html", ".pdf")):
            assert stored.title and stored.title != name, name
            text = texts[name]
            assert "](http" not in text, name
            assert ". . . ." not in text, name
            for furniture in NAVIGATION:
                assert furniture not in text, (name, furniture)
    # A reply is searched by what it says; a bounce's returned message is a file of its own.
    assert imported["mail"]["Re: Test"].body_text == "Hello"
    assert "I always love to find more Ian's" in texts["[scr] yeah for Ians!!.eml"]


@pytest.mark.parametrize("expected", EXPECTED["documents"], ids=lambda d: Path(d["source"]).name)
def test_a_document_reads_as_checked_by_eye(
    expected: dict[str, Any], imported: dict[str, Any]
) -> None:
    source = REAL / expected["source"]
    if "first_items" in expected:
        tree = imported["trees"][f"workspace/{source.relative_to(REAL / 'workspace')}"]
        assert tree.title == expected["title"]
        want = [(depth, text) for depth, text in _expected_walk(expected["first_items"])]
        assert walk(tree.nodes)[: len(want)] == want
        return
    extracted = extract(source.read_bytes(), source.name, "", LIMITS)
    assert extracted.title == expected["title"]
    want_blocks = [
        (b["text"], tuple(b["headings"]), b["is_heading"]) for b in expected["first_blocks"]
    ]
    got = [(b.text, b.headings, b.is_heading) for b in extracted.blocks[: len(want_blocks)]]
    assert got == want_blocks
    stored = imported["files"][source.name]
    assert stored.title == expected["title"]


def _expected_walk(items: list[dict[str, Any]], depth: int = 0) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for item in items:
        out.append((depth, item["text"]))
        out.extend(_expected_walk(item.get("children", []), depth + 1))
    return out
