"""Every view on a phone (390 px wide, Chromium's phone emulation, touch): nothing reaches past
the screen's edge and no two pieces of text are drawn over each other."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from playwright.sync_api import Browser, Page, expect

from subspace import commands
from subspace.ingest.outline import OutlineItem
from tests.browser.conftest import (
    LiveServer,
    add_sources,
    import_mail,
    item_views,
    sign_in_tab,
    wait_for_files,
)

PHONE = {"width": 390, "height": 800}
PAGE_TITLE = "Ferry operations for the winter season, with the holiday timetable and pier changes"
LONG_NAME = "quarterly-infrastructure-capacity-planning-review-2026-final-version.txt"
EML = (
    b"From: Ana Lucia Fernandez-Whitaker <ana.lucia.fernandez-whitaker@example.com>\r\n"
    b"To: operations-team@example.com\r\n"
    b"Subject: Re: Fwd: Ferry schedule changes for the winter season and the holiday timetable\r\n"
    b"Message-ID: <phone-1@example.com>\r\nDate: Mon, 2 Mar 2026 09:00:00 +0000\r\n"
    b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XYZ\r\n\r\n"
    b"--XYZ\r\nContent-Type: text/plain\r\n\r\nThe winter ferry leaves at nine from pier two.\r\n"
    b"--XYZ\r\nContent-Type: text/plain\r\n"
    b"Content-Disposition: attachment; filename=winter-timetable-all-piers.txt\r\n\r\n"
    b"09:00 12:00 17:00\r\n--XYZ--\r\n"
)

# What is wrong with the layout on screen (tests/browser/layout_problems.js): elements past the
# right edge, and pieces of text drawn over each other.
PROBLEMS = (Path(__file__).parent / "layout_problems.js").read_text(encoding="utf-8")


def _workspace(live: LiveServer) -> dict[str, str]:
    cx = live.database.default_context(live.settings)
    page = commands.create_page_from_outline(
        cx,
        PAGE_TITLE,
        [
            OutlineItem("The winter ferry leaves at nine from pier two, and at noon on Sundays.",
                        [OutlineItem("See https://example.com/a/very/long/address/that/does/not/break/anywhere")]),
            OutlineItem("`subspace import ~/notes/with/a/long/path/to/the/folder` brings it in."),
        ],
        source_path="notes/operations/ferry.md",
    )  # fmt: skip
    file = commands.upload_file(cx, LONG_NAME, b"capacity review " * 50, content_type="text/plain")
    commands.upload_file(cx, "archive.xyz", b"\x00\x01", content_type="application/x-unknown")
    with live.api() as api:
        mail_id = import_mail(api, EML)
        wait_for_files(api)
    add_sources(live, live.settings.home.parent / "operations-notes-for-the-winter-season")
    return {"page": str(page.id), "file": str(file.id), "mail": mail_id}


def _keys_shown(tab: Page) -> list[str]:
    """The key names shown on screen (kbd elements, key hints)."""
    shown: list[str] = tab.evaluate(
        """() => [...document.querySelectorAll('kbd, .palette-keys, .outline-help')]
          .filter((el) => el.checkVisibility()).map((el) => el.textContent)"""
    )
    return shown


def _problems(tab: Page, root: str = "body") -> list[str]:
    found: list[str] = tab.evaluate(PROBLEMS, root)
    return found


def test_every_view_fits_a_phone(browser: Browser, live: LiveServer) -> None:
    ids = _workspace(live)
    context = browser.new_context(
        base_url=live.url,
        viewport=PHONE,
        is_mobile=True,
        has_touch=True,  # type: ignore[arg-type]
    )
    found: dict[str, list[str]] = {}
    try:
        tab = context.new_page()
        tab.goto("/signin")
        found["sign-in"] = _problems(tab)
        sign_in_tab(tab, live)
        expect(tab.locator(".cards")).to_be_visible()
        found["start"] = _problems(tab)
        # A touch screen is told of taps, not keys.
        expect(tab.locator("#view .hint")).to_contain_text("Tap Search")
        assert _keys_shown(tab) == []
        for name, path, ready in item_views(ids):
            tab.goto(path)
            expect(tab.locator(ready).first).to_be_visible()
            found[name] = _problems(tab)
        tab.click("#open-drawer")
        expect(tab.locator("#sidebar")).to_be_in_viewport()
        tab.wait_for_timeout(300)  # the drawer slides in
        found["drawer"] = _problems(tab, "#sidebar")
        tab.keyboard.press("Escape")
        tab.click("#open-palette-top")
        expect(tab.locator("#palette-input")).to_be_focused()
        tab.keyboard.type("ferry")
        expect(tab.locator("#palette-list [role=option]").first).to_be_visible()
        found["palette"] = _problems(tab, ".palette")
        # Any query can be asked with a tap (there is no ⇧Enter); no key is hinted at.
        expect(tab.locator(".palette-ask")).to_be_visible()
        assert _keys_shown(tab) == []
        tab.locator(".palette-explain-toggle").first.click()
        tab.locator(".explain-numbers-toggle").click()
        expect(tab.locator(".explain-grid")).to_be_visible()
        found["explain"] = _problems(tab, ".palette")
        tab.click(".palette-close")  # no Esc key on a phone
        expect(tab.locator(".palette")).to_have_count(0)
        tab.goto(f"/p/{ids['page']}")
        expect(tab.locator(".outline")).to_be_visible()  # drawn: its render closes a drawer
        tab.click("#open-drawer")
        tab.click("#show-keys")
        expect(tab.locator("dialog.modal")).to_be_visible()
        found["keys"] = _problems(tab, "dialog.modal")
    finally:
        context.close()
    failing = {view: problems for view, problems in found.items() if problems}
    assert not failing, "\n".join(f"{v}: {p}" for v, ps in failing.items() for p in ps)


def test_an_answer_on_a_phone_keeps_the_page_title_in_view(
    browser: Browser, live: LiveServer
) -> None:
    """An answer lands at the end of a long page, out of the title's sight: the top bar then
    shows the page's title, and a tap on it goes back up."""
    ids = _workspace(live)
    cx = live.database.default_context(live.settings)
    for pier in range(30):  # a page longer than the screen: the answer lands below it
        commands.add_node(cx, UUID(ids["page"]), f"Pier {pier} has its own timetable.")
    context = browser.new_context(
        base_url=live.url,
        viewport=PHONE,
        is_mobile=True,
        has_touch=True,  # type: ignore[arg-type]
    )
    try:
        tab = context.new_page()
        sign_in_tab(tab, live)
        tab.goto(f"/p/{ids['page']}")
        title = tab.locator(".page-title")
        expect(title).to_be_in_viewport()
        tab.click("#open-palette-top")
        # The palette's module loads on the first tap: keys typed before it has focus go nowhere.
        expect(tab.locator("#palette-input")).to_be_focused()
        tab.keyboard.type("when does the winter ferry leave?")
        tab.locator(".palette-ask").click()
        expect(tab.locator(".run-status", has_text="Answered.")).to_be_visible(timeout=30_000)
        # The answer is shown where it streams in, below the fold; the top bar says whose page.
        expect(tab.locator(".run-status", has_text="Answered.")).to_be_in_viewport()
        expect(title).not_to_be_in_viewport()
        expect(tab.locator("#topbar-title")).to_have_text(PAGE_TITLE)
        assert not _problems(tab, "header.topbar")
        tab.click("#topbar-title")  # back to the title
        expect(title).to_be_in_viewport()
        expect(tab.locator("#topbar-title")).to_be_hidden()
        expect(tab.locator("header.topbar")).to_be_in_viewport()
    finally:
        context.close()
