"""The search palette: typed rows, keyboard use, chips, degraded notices, escaping, cancelling."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Browser, Page, Request, Route, expect

from subspace import commands
from tests.browser.conftest import LiveServer, sign_in_tab

ROWS = "#palette-list [role=option]"


def _page_with_bullets(live: LiveServer, title: str, *texts: str) -> tuple[str, list[str]]:
    """A page with a chain of bullets, each nested under the one before; their ids."""
    with live.api() as api:
        page_id = api.post("/api/pages", json={"title": title}).json()["id"]
        ids: list[str] = []
        for text in texts:
            body = {"page_id": page_id, "text": text, "parent_id": ids[-1] if ids else None}
            answer = api.post("/api/nodes", json=body)
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
    return page_id, ids


def _upload(live: LiveServer, name: str, text: str) -> str:
    with live.api() as api:
        answer = api.post("/api/files", files={"file": (name, text.encode(), "text/plain")})
        assert answer.status_code in (200, 201), answer.text
        file_id: str = answer.json()["id"]
        deadline = time.monotonic() + 20
        while api.get(f"/api/files/{file_id}").json()["status"] != "ready":
            assert time.monotonic() < deadline, "the file was not extracted in time"
            time.sleep(0.1)
    return file_id


def _open(page: Page) -> None:
    page.keyboard.press("Control+k")
    expect(page.locator("#palette-input")).to_be_focused()


@contextmanager
def _palette(browser: Browser, live: LiveServer) -> Iterator[Page]:
    """A signed-in tab of its own browser context on `live`, with the palette open."""
    context = browser.new_context(base_url=live.url)
    try:
        page = context.new_page()
        sign_in_tab(page, live)
        _open(page)
        yield page
    finally:
        context.close()


def test_a_bullet_is_found_as_you_type_and_enter_opens_it(page: Page, live: LiveServer) -> None:
    page_id, (_, child) = _page_with_bullets(
        live, "Field notes", "Birds by the river", "A lone quetzalcoatlus overhead"
    )
    _open(page)
    page.keyboard.type("quetzalcoatlus")
    row = page.locator(ROWS).first
    expect(row).to_have_attribute("data-ref", f"node:{child}")
    expect(row.locator(".badge")).to_have_text("Bullet")
    expect(row.locator(".row-crumb")).to_have_text("Field notes › Birds by the river")
    expect(row.locator(".row-passage mark")).to_have_text("quetzalcoatlus")
    combobox = page.locator("#palette-input")
    expect(combobox).to_have_attribute("role", "combobox")
    expect(combobox).to_have_attribute("aria-expanded", "true")
    expect(combobox).to_have_attribute("aria-activedescendant", "palette-opt-0")
    page.keyboard.press("Enter")
    expect(page.locator(".palette")).to_have_count(0)
    assert page.url.endswith(f"/p/{page_id}#{child}")


def test_keyboard_only_moves_wraps_opens_and_esc_returns_focus(
    page: Page, live: LiveServer
) -> None:
    page_id, ids = _page_with_bullets(
        live, "Keyboard", "one xylophonist", "two xylophonist", "three xylophonist"
    )
    with live.api() as api:
        other = api.post("/api/pages", json={"title": "xylophonist club"}).json()["id"]
    _open(page)
    page.keyboard.type("xylophonist")
    options = page.locator(ROWS)
    # The rows of the whole word, not of a keystroke before it: an earlier answer drawn late
    # would take the selection back to the first row under the keys pressed below.
    expect(page.locator("#palette-list")).to_have_attribute("data-query", "xylophonist")
    # One page's best row, its exact "+2 more", and the other page.
    expect(options).to_have_count(3)
    expect(page.locator(".palette-more")).to_have_text("+2 more")
    classes = [options.nth(i).get_attribute("class") for i in range(3)]
    more = classes.index("palette-more")
    for _ in range(more):
        page.keyboard.press("ArrowDown")
    expect(options.nth(more)).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Enter")  # "+2 more" expands in place
    expect(options).to_have_count(4)
    refs = {options.nth(i).get_attribute("data-ref") for i in range(4)}
    assert refs == {f"node:{i}" for i in ids} | {f"page:{other}"}
    active = page.locator("[role=option][aria-selected=true]")
    expect(active).to_have_id(f"palette-opt-{more}")  # the first row the expansion added
    for _ in range(more + 1):
        page.keyboard.press("ArrowUp")  # past the first row: wraps to the last
    expect(active).to_have_count(1)
    expect(active).to_have_id("palette-opt-3")
    page.keyboard.press("ArrowDown")
    expect(active).to_have_id("palette-opt-0")
    target = options.nth(0).get_attribute("data-ref")
    page.keyboard.press("Enter")
    expect(page.locator(".palette")).to_have_count(0)
    assert target is not None
    kind, ident = target.split(":")
    opened = f"/p/{page_id}#{ident}" if kind == "node" else f"/p/{ident}"
    expect(page).to_have_url(re.compile(re.escape(opened) + "$"))

    page.locator("#page-filter").focus()
    _open(page)
    page.keyboard.press("Escape")
    expect(page.locator(".palette")).to_have_count(0)
    expect(page.locator("#page-filter")).to_be_focused()


def test_the_search_button_opens_it_and_a_kind_chip_filters(page: Page, live: LiveServer) -> None:
    _page_with_bullets(live, "Notes", "the okapi enclosure")
    file_id = _upload(live, "report.txt", "An okapi report.\n\nThe okapi is shy.")
    page.click("#open-palette")
    expect(page.locator("#palette-input")).to_be_focused()
    page.keyboard.type("okapi")
    options = page.locator(ROWS)
    expect(options).to_have_count(2)
    page.fill("#palette-input", "")
    page.keyboard.type("kind:file okapi")
    expect(page.locator("#palette-input")).to_have_value("okapi")
    expect(page.locator(".chip[aria-pressed=true]")).to_have_text("Files")
    expect(options).to_have_count(1)
    expect(options.first.locator(".badge")).to_have_text("File")
    expect(options.first.locator(".row-title")).to_have_text("report.txt")
    # The spellings the server declares (search/options.py) work as chips too.
    page.fill("#palette-input", "")
    page.keyboard.type("kind:bullets okapi")
    expect(page.locator(".chip[aria-pressed=true]")).to_have_text(["Bullets", "Files"])
    expect(options).to_have_count(2)
    page.get_by_role("button", name="Bullets").click()
    expect(options).to_have_count(1)
    page.locator("#palette-input").focus()
    page.keyboard.press("Enter")
    # The address changes when the router has opened the row: wait for it, not for a time.
    expect(page).to_have_url(re.compile(rf"/files/{file_id}#c0$"))


def test_an_xss_title_and_bullet_render_as_text(page: Page, live: LiveServer) -> None:
    title = "<img src=x onerror=window.__pwned=1> zanzibar"
    bullet = "<script>window.__pwned=2</script> zanzibar <b>bold</b>"
    _page_with_bullets(live, title, bullet)
    _open(page)
    page.keyboard.type("zanzibar")
    options = page.locator(ROWS)
    expect(options).to_have_count(2)
    expect(page.locator("[data-ref^='page:'] .row-title")).to_have_text(title)
    page.click(".palette-more")  # the page's title is its best row; its bullet is one more
    expect(page.locator(".row-passage")).to_contain_text("<script>window.__pwned=2</script>")
    assert page.locator("#palette-list img, #palette-list script, #palette-list b").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_a_degraded_search_says_which_leg_did_not_run(
    browser: Browser, live_dead_provider: LiveServer
) -> None:
    live = live_dead_provider
    _page_with_bullets(live, "Degraded", "the capybara sleeps")
    with _palette(browser, live) as page:
        page.keyboard.type("capybara")
        expect(page.locator(ROWS)).to_have_count(1)
        expect(page.locator(".palette-degraded")).to_contain_text(
            "Keyword results only: the embedding provider did not answer"
        )
        expect(page.locator(".palette-pending")).to_contain_text("for embeddings")


def test_a_search_without_the_lexical_index_says_so_and_finds_every_match(
    browser: Browser, live_without_lexical_index: LiveServer
) -> None:
    live = live_without_lexical_index
    _page_with_bullets(live, "Harbors", "harbor of ash", "harbor of salt", "a quill")
    with _palette(browser, live) as page:
        page.locator("#palette-input").fill("harbors quill")
        expect(page.locator(".palette-degraded")).to_contain_text(
            "Keyword search is running without its index"
        )
        expect(page.locator("#palette-list")).to_contain_text("a quill")


def test_a_typo_is_corrected_and_the_explain_toggle_shows_both_legs(
    page: Page, live: LiveServer
) -> None:
    _page_with_bullets(live, "Materials", "biomaterials for implants")
    _open(page)
    page.keyboard.type("biomateirals")
    expect(page.locator(".palette-correction strong")).to_have_text("biomaterials")
    page.click(".palette-explain-toggle")
    panel = page.locator("#palette-explain")
    expect(panel).to_be_visible()
    # First, in words: found by its (corrected) word; the numbers wait behind a button.
    expect(panel.locator(".explain-why li")).to_have_count(1)
    expect(panel.locator(".explain-reason")).to_have_text(
        re.compile(
            r"^Found by its words: 1st, for “biomaterials”(; by meaning: \d+(st|nd|rd|th))?\.$"
        )
    )
    expect(panel.locator(".explain-lexical")).to_be_hidden()
    page.click(".explain-numbers-toggle")
    expect(panel.locator(".explain-lexical li")).to_have_count(1)
    expect(panel.locator(".explain-lexical li")).to_contain_text("#1 biomaterials for implants")
    expect(panel.locator(".explain-lexical li")).to_contain_text("fused 0.0")
    expect(panel.locator(".explain-fused .terms li").first).to_contain_text("/ (60 + ")
    expect(panel.locator(".explain-steps")).to_contain_text("legs")  # each step, timed
    expect(page.locator("#palette-input")).to_be_focused()


@pytest.fixture
def held(page: Page) -> Iterator[list[Route]]:
    """Search requests held by the test until it lets them through."""
    routes: list[Route] = []
    page.route("**/api/search", lambda route: routes.append(route))
    yield routes
    page.unroute("**/api/search")


def test_each_keystroke_cancels_the_search_in_flight(
    page: Page, live: LiveServer, held: list[Route]
) -> None:
    _page_with_bullets(live, "Cancel", "ocelot")
    events: dict[str, list[Request]] = {"sent": [], "failed": [], "finished": []}

    def counter(name: str) -> Callable[[Request], None]:
        def count(request: Request) -> None:
            if request.url.endswith("/api/search"):
                events[name].append(request)

        return count

    page.on("request", counter("sent"))
    page.on("requestfailed", counter("failed"))
    page.on("requestfinished", counter("finished"))
    _open(page)
    for count, key in enumerate("oce", start=1):
        page.keyboard.type(key)
        deadline = time.monotonic() + 5
        while len(held) < count:  # the search for this prefix has left the page
            assert time.monotonic() < deadline
            page.wait_for_timeout(10)
    expect(page.locator("#palette-list .palette-empty")).to_be_visible()  # no flicker: hint stays
    held[-1].continue_()
    expect(page.locator(ROWS)).to_have_count(1)
    assert len(events["sent"]) == 3
    assert len(events["failed"]) == 2  # the two earlier prefixes were cancelled
    assert len(events["finished"]) == 1
    assert (events["finished"][0].post_data_json or {})["query"] == "oce"

    page.keyboard.type("lot", delay=10)  # faster than the pause: fewer searches than keys
    deadline = time.monotonic() + 5
    while (held[-1].request.post_data_json or {}).get("query") != "ocelot":
        assert time.monotonic() < deadline
        page.wait_for_timeout(10)
    page.wait_for_timeout(200)
    # One search for the word; two when a busy machine stretched a gap past the pause.
    assert 1 <= len(held) - 3 < 3
    held[-1].continue_()
    expect(page.locator("#palette-list")).to_have_attribute("data-query", "ocelot")


def test_memory_and_mail_rows_are_marked_and_open_where_they_live(
    page: Page, live: LiveServer
) -> None:
    _, (bullet,) = _page_with_bullets(live, "Zoo", "the wombat prefers carrots")
    with live.api() as api:
        assert api.patch(f"/api/nodes/{bullet}", json={"props": {"memory": True}}).is_success
    cx = live.database.default_context(live.settings)
    mail = commands.add_mail(
        cx,
        message_id="<wombat@example.com>",
        subject="Wombat feeding rota",
        sender="Ada <ada@example.com>",
        body_text="Who feeds the wombat on Sunday?",
    )
    _open(page)
    page.keyboard.type("wombat")
    memory = page.locator(".row-mem")
    expect(memory.locator(".badge")).to_have_text("Memory")
    expect(memory.locator(".row-passage mark")).to_have_text("wombat")
    letter = page.locator(".row-mail")
    expect(letter.locator(".row-title")).to_have_text("Wombat feeding rota")
    expect(letter.locator(".row-title mark")).to_have_text("Wombat")  # a subject's words marked
    expect(letter.locator(".row-sender")).to_contain_text("ada@example.com")
    chips = page.locator(".palette-filters .chip")
    chips.filter(has_text="Memories").click()  # the focus stays in the input
    expect(page.locator("#palette-input")).to_be_focused()
    expect(page.locator(ROWS)).to_have_count(1)
    page.keyboard.press("Tab")  # to the first chip (Pages), pressed from the keyboard
    expect(chips.first).to_be_focused()
    page.keyboard.press("Enter")
    expect(chips.first).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#palette-input")).to_be_focused()
    for pressed in ("Pages", "Memories"):
        chips.filter(has_text=pressed).click()
    expect(letter).to_be_visible()
    letter.click()
    expect(page.locator(".palette")).to_have_count(0)
    assert page.url.endswith(f"/mail/{mail.id}")


def test_a_kb_chip_typed_in_the_query_keeps_to_that_knowledge_base(
    page: Page, live: LiveServer
) -> None:
    with live.api() as api:
        research = api.post("/api/knowledge-bases", json={"name": "Research"}).json()["id"]
        theirs = api.post("/api/pages", json={"title": "pangolin scales", "kb_id": research})
        ours = api.post("/api/pages", json={"title": "pangolin sightings"})
    page.reload()
    page.wait_for_selector("#page-list")
    _open(page)
    page.keyboard.type("pangolin")
    options = page.locator(ROWS)
    expect(options).to_have_count(2)
    expect(options.first.locator(".row-kb")).to_be_visible()  # two bases: rows say which
    page.fill("#palette-input", "")
    page.keyboard.type("kb:research")  # taken when the typing pauses
    expect(page.locator("#palette-input")).to_have_value("")
    expect(page.locator(".chip[aria-pressed=true]")).to_have_text("Research")
    page.keyboard.type("pangolin")
    expect(options).to_have_count(1)
    expect(options.first).to_have_attribute("data-ref", f"page:{theirs.json()['id']}")
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.press("Backspace")  # on the empty input: the last chip goes
    expect(page.locator(".chip[aria-pressed=true]")).to_have_count(0)
    page.keyboard.type("pangolin")
    expect(options).to_have_count(2)
    assert ours.status_code == 201


def test_gibberish_says_no_matches_and_the_answers_chip_keeps_to_answers(
    page: Page, live: LiveServer
) -> None:
    _page_with_bullets(live, "Harbour log", "The ferry leaves pier 3 at 7:40")
    _open(page)
    page.keyboard.type("xqzvbnm wplkjh")
    empty = page.locator("#palette-list .palette-nomatch strong")
    # (and, once the bullet is embedded, "; nothing close enough in meaning either.")
    expect(empty).to_have_text(re.compile(r"^No matches for “xqzvbnm wplkjh”[.;]"))
    expect(page.locator(ROWS)).to_have_count(0)
    page.fill("#palette-input", "ferry pier")
    expect(page.locator(ROWS).first.locator(".badge")).to_have_text("Bullet")
    page.get_by_role("button", name="Answers").click()
    expect(page.get_by_role("button", name="Answers")).to_have_attribute("aria-pressed", "true")
    expect(empty).to_have_text("No matches for “ferry pier” with these filters.")
