"""Pages as outlines in the browser: typing, the keyboard, saving, two windows, links to bullets."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from playwright.sync_api import Page, Route, expect

from subspace import commands
from subspace.db import queries
from subspace.models import Node
from tests.browser.conftest import LiveServer

BULLETS = ".outline li.bullet"
TEXTS = ".outline .bullet-text"


def _tree(live: LiveServer, page_id: str) -> list[Any]:
    """The page's outline as the database holds it: [(text, [children...]), ...]."""
    with live.database.pool.connection() as conn:
        page = queries.get_page_tree(
            conn, live.database.default_context(live.settings).actor.workspace_id, UUID(page_id)
        )

    def shape(nodes: list[Node]) -> list[Any]:
        return [(n.text, shape(n.children)) for n in nodes]

    return shape(page.nodes)


def _page_id(page: Page) -> str:
    return page.url.rsplit("/p/", 1)[1].split("#")[0]


def _saved(page: Page) -> None:
    expect(page.locator(".save-state")).to_have_text("Saved")


def _new_page(page: Page) -> str:
    page.click("#new-page")
    expect(page.locator(".page-title")).to_be_visible()
    return _page_id(page)


def test_type_a_page_and_read_it_back(page: Page, live: LiveServer) -> None:
    pid = _new_page(page)
    title = page.locator(".page-title")
    title.fill("Launch plan")
    title.press("Enter")  # into the first (empty) bullet
    page.keyboard.type("Goals")
    page.keyboard.press("Enter")
    page.keyboard.type("Ship the beta")
    page.keyboard.press("Enter")
    page.keyboard.type("Risks")
    page.locator(TEXTS).nth(1).focus()
    page.keyboard.press("Tab")
    _saved(page)
    expect(page.locator("#page-list a", has_text="Launch plan")).to_be_visible()

    page.reload()
    expect(page.locator(".page-title")).to_have_value("Launch plan")
    expect(page.locator(TEXTS)).to_have_count(3)
    top = page.locator(".outline > li.bullet")
    expect(top).to_have_count(2)
    expect(top.nth(0).locator(".outline-children .bullet-text")).to_have_value("Ship the beta")
    assert _tree(live, pid) == [("Goals", [("Ship the beta", [])]), ("Risks", [])]
    api = page.request.get(f"/api/pages/{pid}").json()
    assert api["title"] == "Launch plan"
    assert [n["text"] for n in api["nodes"]] == ["Goals", "Risks"]


def _seed(live: LiveServer, title: str, texts: list[str]) -> tuple[str, list[str]]:
    cx = live.database.default_context(live.settings)
    made = commands.create_page(cx, title)
    ids = [str(commands.add_node(cx, made.id, text).id) for text in texts]
    return str(made.id), ids


def _focused_text(page: Page) -> str:
    return str(page.evaluate("document.activeElement.value"))


def test_the_keyboard_edits_the_outline(page: Page, live: LiveServer) -> None:
    pid, _ = _seed(live, "Keys", ["Alpha", "Bravo", "Charlie"])
    page.goto(f"/p/{pid}")
    texts = page.locator(TEXTS)
    expect(texts).to_have_count(3)
    texts.nth(0).focus()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("Delta")
    expect(texts.nth(1)).to_be_focused()
    page.keyboard.press("Tab")  # Delta under Alpha
    expect(
        page.locator(".outline > li.bullet").nth(0).locator(".outline-children .bullet-text")
    ).to_have_value("Delta")
    _saved(page)
    assert _tree(live, pid) == [("Alpha", [("Delta", [])]), ("Bravo", []), ("Charlie", [])]

    page.keyboard.press("Shift+Tab")  # back to the top level, after Alpha
    page.keyboard.press("Alt+ArrowDown")  # after Bravo
    expect(texts.nth(2)).to_be_focused()
    _saved(page)
    assert _tree(live, pid) == [("Alpha", []), ("Bravo", []), ("Delta", []), ("Charlie", [])]
    page.keyboard.press("Alt+ArrowUp")
    page.keyboard.press("Alt+ArrowUp")  # first
    expect(texts.nth(0)).to_have_value("Delta")
    _saved(page)
    assert _tree(live, pid) == [("Delta", []), ("Alpha", []), ("Bravo", []), ("Charlie", [])]

    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert _focused_text(page) == "Bravo"
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")  # split at the caret
    assert _focused_text(page) == "avo"
    page.keyboard.press("ArrowUp")
    assert _focused_text(page) == "Br"
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    expect(texts).to_have_count(6)
    page.keyboard.press("Backspace")  # an empty bullet: deleted, the one before focused
    expect(texts).to_have_count(5)
    assert _focused_text(page) == "Br"
    _saved(page)
    assert _tree(live, pid) == [
        ("Delta", []),
        ("Alpha", []),
        ("Br", []),
        ("avo", []),
        ("Charlie", []),
    ]
    # Backspace in a bullet with text only deletes a character
    page.keyboard.press("Backspace")
    assert _focused_text(page) == "B"
    _saved(page)
    assert _tree(live, pid)[2] == ("B", [])
