"""The app as a product: the start view, dialogs, knowledge bases in the address, the tags row,
the palette's Ask row and notices, upload and import reports, narrow screens, the keys list."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Browser, Page, expect

from subspace import commands
from tests.browser.conftest import LiveServer, sign_in_tab

ROWS = "#palette-list [role=option]"

EML_WITH_ATTACHMENT = (
    b"From: Ana <ana@example.com>\r\nTo: ops@example.com\r\nSubject: Ferry schedule\r\n"
    b"Message-ID: <ferry-1@example.com>\r\nDate: Mon, 2 Mar 2026 09:00:00 +0000\r\n"
    b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=XYZ\r\n\r\n"
    b"--XYZ\r\nContent-Type: text/plain\r\n\r\nThe winter ferry leaves at nine.\r\n"
    b"--XYZ\r\nContent-Type: text/plain\r\n"
    b"Content-Disposition: attachment; filename=times.txt\r\n\r\n"
    b"09:00 12:00 17:00\r\n--XYZ--\r\n"
)


def _type_in_palette(page: Page, text: str) -> None:
    page.keyboard.press("Control+k")
    expect(page.locator("#palette-input")).to_be_focused()
    page.keyboard.type(text)


def _narrow(browser: Browser, live: LiveServer) -> Page:
    context = browser.new_context(base_url=live.url, viewport={"width": 390, "height": 844})
    tab = context.new_page()
    sign_in_tab(tab, live)
    # The start view drawn: its render would close a drawer opened before it.
    tab.wait_for_selector(".cards")
    return tab


def _overflowing(tab: Page) -> list[str]:
    """The visible elements of the view that reach past the viewport's right edge."""
    found: list[str] = tab.evaluate(
        """() => [...document.querySelectorAll('#view *, .topbar *')]
          .filter((el) => el.offsetParent !== null)
          .filter((el) => el.getBoundingClientRect().right > innerWidth + 1)
          .map((el) => el.tagName + '.' + el.className)"""
    )
    return found


def test_the_start_view_shows_what_the_base_holds_and_makes_a_page(
    page: Page, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    expect(page.locator(".empty-state")).to_contain_text("This knowledge base is empty")
    assert "?kb=" in page.url  # the start view's address names its base
    commands.create_page(cx, "Harbor ops log")
    commands.upload_file(cx, "notes.txt", b"tide tables", content_type="text/plain")
    page.reload()
    cards = page.locator(".cards")
    expect(cards).to_contain_text("1page")
    expect(cards).to_contain_text("1file")
    expect(cards).to_contain_text("0messages")
    expect(page.locator(".item-list")).to_contain_text("Harbor ops log")
    page.click("#start-new-page")
    expect(page).to_have_url(re.compile(r"/p/[0-9a-f-]{36}$"))
    expect(page.locator(".page-title")).to_be_focused()
    page.reload()  # the new page's address holds
    expect(page.locator(".page-title")).to_have_value("Untitled")


def test_a_new_knowledge_base_comes_from_a_dialog_and_is_opened(
    page: Page, live: LiveServer
) -> None:
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a browser dialog opened")))
    cx = live.database.default_context(live.settings)
    old = commands.create_page(cx, "Default base page")
    page.goto(f"/p/{old.id}")
    page.click("#new-kb")
    dialog = page.locator("dialog.modal")
    expect(dialog).to_be_visible()
    expect(dialog.locator("input")).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")  # input, Cancel, Create: the focus wraps inside the dialog
    assert page.evaluate("document.activeElement.closest('dialog') !== null")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)

    page.click("#new-kb")
    page.locator("dialog.modal input").fill("Research")
    page.keyboard.press("Enter")
    expect(page.locator("dialog.modal")).to_have_count(0)
    expect(page.locator("#view h1")).to_have_text("Research")  # the start view of the new base
    assert "?kb=" in page.url
    assert f"/p/{old.id}" not in page.url
    expect(page.locator("#kb-select option:checked")).to_have_text("Research")
    expect(page.locator("#page-list")).to_contain_text("No pages yet")
    page.reload()
    expect(page.locator("#view h1")).to_have_text("Research")

    page.click("#new-kb")
    page.locator("dialog.modal input").fill("Research")  # taken: the dialog says so and stays
    page.keyboard.press("Enter")
    expect(page.locator("dialog.modal .dialog-error")).not_to_be_empty()


def test_switching_bases_keeps_the_view_and_back_returns(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    research = commands.create_knowledge_base(cx, "Research")
    commands.upload_file(cx, "default.txt", b"default words", content_type="text/plain")
    commands.upload_file(
        cx, "research.txt", b"research words", content_type="text/plain", kb_id=research.id
    )
    page.goto("/files")
    expect(page.locator(".file-table")).to_contain_text("default.txt")
    page.select_option("#kb-select", label="Research")
    expect(page.locator(".file-table")).to_contain_text("research.txt")
    assert page.url.endswith(f"/files?kb={research.id}")
    page.reload()
    expect(page.locator(".file-table")).to_contain_text("research.txt")
    page.go_back()
    expect(page.locator(".file-table")).to_contain_text("default.txt")
    expect(page.locator("#kb-select option:checked")).not_to_have_text("Research")


def test_tags_are_a_row_of_chips_and_add_tag_opens_the_form(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    created = commands.create_page(cx, "Tagged")
    page.goto(f"/p/{created.id}")
    panel = page.locator(".page-tags .tags-panel")
    expect(panel.locator(".tag-add")).to_be_visible()
    expect(panel.locator(".tag-define")).to_be_hidden()  # no form above the bullets
    box = panel.bounding_box()
    assert box is not None, box
    assert box["height"] < 50, box
    panel.locator(".tag-add").click()
    expect(panel.locator(".tag-define input")).to_be_visible()


def test_mail_import_counts_messages_and_attachments_and_mail_takes_tags(
    page: Page, live: LiveServer
) -> None:
    page.goto("/mail")
    page.set_input_files(
        ".upload-button input[type=file]",
        files=[{"name": "ferry.eml", "mimeType": "message/rfc822", "buffer": EML_WITH_ATTACHMENT}],
    )
    expect(page.locator(".upload-row .upload-status")).to_have_text(
        "1 message imported, 1 attachment imported"
    )
    page.click("text=Ferry schedule")
    panel = page.locator(".mail-tags .tags-panel")
    panel.locator(".tag-add").click()
    panel.locator(".tag-define input").fill("route")
    panel.locator(".tag-define button").click()
    panel.locator(".tag-set input").fill("north")
    panel.locator(".tag-set button").click()
    expect(panel.locator(".tag-chip")).to_have_text("route north ×")


def test_an_upload_row_follows_the_file_to_its_end_and_types_read_as_words(
    page: Page, live: LiveServer
) -> None:
    page.goto("/files")
    page.set_input_files(
        ".upload-button input[type=file]",
        files=[
            {"name": "plan.md", "mimeType": "text/markdown", "buffer": b"# Plan\n\nship it"},
            {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": b"%PDF-1.4 not a pdf"},
            {"name": "notes.one", "mimeType": "text/x-one", "buffer": b"plain words"},
        ],
    )
    rows = page.locator(".upload-row")
    expect(rows.filter(has_text="plan.md").locator(".upload-status")).to_have_text(
        "Ready: searchable."
    )
    expect(rows.filter(has_text="broken.pdf").locator(".upload-status")).to_contain_text("Failed:")
    types = page.locator(".file-table .type-cell")
    expect(types).to_have_count(3)
    # Named as a person reads them; a text type without a name of its own is Text.
    assert sorted(types.all_inner_texts()) == ["Markdown", "PDF", "Text"]
    # A document with a title of its own is listed by it, its file name beneath and in its hover.
    names = page.locator(".file-table .file-name")
    plan = names.filter(has_text="Plan")
    expect(plan).to_have_attribute("title", "Plan (plan.md)")
    expect(page.locator(".file-table .file-source").first).to_have_text("plan.md")
    for n in range(3):
        assert names.nth(n).inner_text() in (names.nth(n).get_attribute("title") or "")


def test_a_question_puts_the_ask_row_first_and_enter_still_opens_the_best_hit(
    page: Page, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    commands.create_page(cx, "When does the ferry leave?")
    _type_in_palette(page, "when does the ferry leave?")
    options = page.locator(ROWS)
    expect(options.first).to_have_class(re.compile("palette-ask"))
    expect(options.first).to_contain_text("⇧ Enter")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")


def test_kb_chips_for_one_base_and_an_unknown_base_says_so(page: Page, live: LiveServer) -> None:
    _type_in_palette(page, "kb:Default ")
    expect(page.locator(".palette-chips .chip", has_text="Default")).to_have_attribute(
        "aria-pressed", "true"
    )
    page.fill("#palette-input", "ferry kb:Nope")
    expect(page.locator(".palette-unknown-kb")).to_contain_text("No knowledge base named “Nope”")


def test_explain_opens_beside_the_list(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    for n in range(6):
        commands.create_page(cx, f"Ferry timetable {n}")
    _type_in_palette(page, "ferry")
    expect(page.locator(ROWS)).to_have_count(6)
    page.click(".palette-explain-toggle")
    expect(page.locator(".palette-explain")).to_be_visible()
    listing = page.locator("#palette-list").bounding_box()
    panel = page.locator(".palette-explain").bounding_box()
    assert listing
    assert panel
    assert panel["x"] >= listing["x"] + listing["width"] - 1  # beside, not below
    assert listing["height"] > 200  # the list keeps its rows in view


def test_gibberish_has_its_own_empty_state(page: Page, live: LiveServer) -> None:
    _type_in_palette(page, "xqzvbnm wplkjh")
    expect(page.locator(".palette-nomatch")).to_contain_text("No matches for “xqzvbnm wplkjh”")


def test_the_narrow_screen_has_a_drawer_and_nothing_is_clipped(
    browser: Browser, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    long_title = "A page title long enough to wrap twice on a narrow phone screen for sure"
    created = commands.create_page(cx, long_title)
    tab = _narrow(browser, live)
    try:
        expect(tab.locator("#sidebar")).to_be_hidden()
        tab.click("#open-drawer")
        expect(tab.locator("#sidebar")).to_be_visible()
        tab.keyboard.press("Escape")
        expect(tab.locator("#sidebar")).to_be_hidden()
        expect(tab.locator("#open-drawer")).to_be_focused()
        tab.click("#open-drawer")
        tab.click(f"#page-list a[data-page-id='{created.id}']")
        expect(tab.locator("#sidebar")).to_be_hidden()
        title = tab.locator(".page-title")
        expect(title).to_have_value(long_title)
        box = title.bounding_box()
        assert box is not None
        assert box["height"] > 50
        assert not _overflowing(tab)
        assert tab.evaluate("document.scrollingElement.scrollWidth") <= 390
        small = tab.evaluate(
            """() => [...document.querySelectorAll('button, a, select, input')]
              .filter((el) => el.offsetParent !== null && !el.closest('.outline'))
              .map((el) => el.type === 'checkbox' ? el.closest('label') : el)
              .filter((el) => el.getBoundingClientRect().height < 40)
              .map((el) => el.outerHTML.slice(0, 80))"""
        )
        assert not small, small
        tab.click("#open-palette-top")
        box = tab.locator(".palette").bounding_box()
        assert box is not None
        assert box["width"] >= 389
        assert box["height"] >= 840
    finally:
        tab.context.close()


def test_question_mark_lists_the_keys(page: Page, live: LiveServer) -> None:
    page.locator("#view").focus()
    page.keyboard.press("?")
    dialog = page.locator("dialog.modal")
    expect(dialog).to_contain_text("Keyboard shortcuts")
    expect(dialog).to_contain_text("Search")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)


def test_the_favicon_is_served_and_redoc_loads_nothing_from_elsewhere(
    page: Page, live: LiveServer
) -> None:
    icon = page.request.get("/favicon.ico")
    assert icon.status == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    elsewhere: list[str] = []
    page.on(
        "request",
        lambda r: (
            None if r.url.startswith((live.url, "blob:", "data:")) else elsewhere.append(r.url)
        ),
    )
    failed: list[str] = []
    page.on("console", lambda m: failed.append(m.text) if m.type == "error" else None)
    page.goto("/redoc")
    page.wait_for_selector(".api-content, [role=navigation]", timeout=20_000)
    time.sleep(0.5)
    assert not elsewhere, elsewhere
    assert not failed, failed
