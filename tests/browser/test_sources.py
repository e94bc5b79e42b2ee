"""The Sources view, as a person uses it: add a watched folder, watch it sync and its items
arrive in search naming it, give a paused mailbox its password again, remove a source."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from subspace.config import Settings
from subspace.database import Database
from subspace.sources.secrets import new_key
from tests.browser.conftest import LiveServer, _serve, signed_in_tab


@pytest.fixture
def live_sources(database: Database, settings: Settings, tmp_path: Path) -> Iterator[LiveServer]:
    """The whole app, allowed to watch folders under tmp_path, with a key for passwords."""
    allowed = replace(settings, folder_roots=str(tmp_path), sources_key=new_key())
    yield from _serve(database, allowed)


@pytest.fixture
def tab(browser: Browser, live_sources: LiveServer) -> Iterator[Page]:
    yield from signed_in_tab(browser, live_sources)


def test_a_folder_added_in_the_sources_view_syncs_and_names_itself_in_search(
    tab: Page, live_sources: LiveServer, tmp_path: Path
) -> None:
    notes = tmp_path / "harbour-notes"
    notes.mkdir()
    (notes / "ferry.md").write_text("# Ferry\n\n- the winter ferry leaves at nine\n")
    tab.goto("/sources")
    expect(tab.locator(".empty-state")).to_contain_text("No sources yet")
    tab.click(".source-add summary")
    tab.get_by_label("Name", exact=True).fill("Harbour notes")
    tab.get_by_label("Folder", exact=True).fill(str(notes))
    tab.click("button:has-text('Add source')")
    card = tab.locator(".source-card")
    expect(card).to_contain_text("in sync", timeout=20_000)
    expect(card).to_contain_text("1 added")

    (notes / "pier.md").write_text("# Pier\n\n- pier two is closed for repairs\n")
    # The palette searches once per keystroke: it is opened once the watched file is indexed.
    with live_sources.api() as api:
        deadline = time.monotonic() + 30
        while not api.get("/api/search", params={"q": "repairs", "mode": "lexical"}).json()["rows"]:
            assert time.monotonic() < deadline, "pier.md was not searchable within 30 s"
            time.sleep(0.1)
    tab.keyboard.press("Control+k")
    expect(tab.locator("#palette-input")).to_be_focused()
    tab.keyboard.type("repairs")
    row = tab.locator("#palette-list [role=option]").first
    expect(row).to_contain_text("Pier", timeout=20_000)
    expect(row.locator(".row-source")).to_have_text("from Harbour notes")
    tab.keyboard.press("Escape")

    tab.click("button:has-text('Remove')")
    tab.click("dialog.modal button:has-text('Remove')")
    expect(tab.locator(".empty-state")).to_be_visible()


def test_a_bad_folder_is_refused_in_the_form_with_what_to_do(tab: Page) -> None:
    tab.goto("/sources")
    tab.click(".source-add summary")
    tab.get_by_label("Name", exact=True).fill("Elsewhere")
    tab.get_by_label("Folder", exact=True).fill("/etc")
    tab.click("button:has-text('Add source')")
    expect(tab.get_by_role("alert")).to_contain_text("SUBSPACE_FOLDER_ROOTS")
