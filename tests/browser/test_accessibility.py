"""axe-core over every view, light and dark, wide and narrow: no serious or critical violation."""

from __future__ import annotations

from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from subspace import commands
from tests.browser.conftest import LiveServer, add_sources, import_mail, item_views, wait_for_files

AXE = Axe()
BLOCKING = {"serious", "critical"}
EML = (
    b"From: Ana <ana@example.com>\r\nTo: ops@example.com\r\nSubject: Ferry schedule\r\n"
    b"Message-ID: <axe-1@example.com>\r\nDate: Mon, 2 Mar 2026 09:00:00 +0000\r\n\r\n"
    b"The winter ferry leaves at nine.\r\n"
)


def _violations(tab: Page) -> list[str]:
    results: Any = AXE.run(tab).response
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in results["violations"]
        if v["impact"] in BLOCKING
    ]


def _workspace(live: LiveServer) -> dict[str, str]:
    cx = live.database.default_context(live.settings)
    page = commands.create_page(cx, "Ferry operations")
    commands.add_node(cx, page.id, "The winter ferry leaves at nine from pier two.")
    file = commands.upload_file(cx, "timetable.txt", b"ferry 09:00", content_type="text/plain")
    with live.api() as api:
        mail_id = import_mail(api, EML)
        wait_for_files(api)
    add_sources(live, live.settings.home.parent / "operations-notes-for-the-winter-season")
    return {"page": str(page.id), "file": str(file.id), "mail": mail_id}


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1280, 390])
def test_every_view_passes_axe(browser: Browser, live: LiveServer, scheme: str, width: int) -> None:
    ids = _workspace(live)
    context = browser.new_context(
        base_url=live.url,
        color_scheme=scheme,
        viewport={"width": width, "height": 900},  # type: ignore[arg-type]
    )
    found: dict[str, list[str]] = {}
    try:
        tab = context.new_page()
        tab.goto("/signin")
        found["sign-in"] = _violations(tab)
        tab.goto(live.signin_path())
        found["sign-in with a code"] = _violations(tab)
        tab.click("button[type=submit]")
        expect(tab.locator(".cards")).to_be_visible()
        found["start"] = _violations(tab)
        for name, path, ready in item_views(ids):
            tab.goto(path)
            expect(tab.locator(ready).first).to_be_visible()
            found[name] = _violations(tab)
        tab.goto(f"/p/{ids['page']}")
        tab.keyboard.press("Control+k")
        expect(tab.locator("#palette-input")).to_be_focused()
        tab.keyboard.type("ferry")
        expect(tab.locator("#palette-list [role=option]").first).to_be_visible()
        found["palette"] = _violations(tab)
        tab.click(".palette-explain-toggle")
        tab.click(".explain-numbers-toggle")
        expect(tab.locator(".palette-explain .explain-grid")).to_be_visible()
        found["explain"] = _violations(tab)
    finally:
        context.close()
    assert not {view: v for view, v in found.items() if v}
