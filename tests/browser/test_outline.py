"""Pages as outlines in the browser: typing, the keyboard, saving, two windows, links to bullets."""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from playwright.sync_api import Page, Route, expect

from subspace import commands
from subspace.db import queries
from subspace.models import Node, TreeNode
from tests.browser.conftest import LiveServer

BULLETS = ".outline li.bullet"
TEXTS = ".outline .bullet-text"
BIG_PAGE_WAIT_MS = 60_000  # a 10,000-bullet page loaded and built while the suite runs beside it


def _tree(live: LiveServer, page_id: str) -> list[Any]:
    """The page's outline as the database holds it: [(text, [children...]), ...]."""
    with live.database.pool.connection() as conn:
        page = queries.get_page_tree(
            conn, live.database.default_context(live.settings).actor.workspace_id, UUID(page_id)
        )

    def shape(nodes: list[TreeNode]) -> list[Any]:
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
    page.locator(TEXTS).nth(0).focus()
    page.keyboard.press("ArrowUp")  # from the first bullet back to the title
    expect(title).to_be_focused()
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


def _node(live: LiveServer, node_id: str) -> Node:
    with live.database.pool.connection() as conn:
        ws = live.database.default_context(live.settings).actor.workspace_id
        return queries.get_node(conn, ws, UUID(node_id))


def test_memory_toggle_persists(page: Page, live: LiveServer) -> None:
    pid, (a, b) = _seed(live, "Memory", ["remember the milk", "plain"])
    page.goto(f"/p/{pid}")
    first = page.locator(BULLETS).nth(0)
    first.locator(".memory-toggle").click()
    expect(first).to_have_class("bullet is-memory")
    expect(first.locator(".memory-toggle")).to_have_attribute("aria-pressed", "true")
    page.locator(TEXTS).nth(1).focus()
    page.keyboard.press("Alt+m")  # the keyboard way
    _saved(page)
    assert _node(live, a).props == {"memory": True}
    assert _node(live, b).props == {"memory": True}
    page.reload()
    expect(page.locator(".outline li.is-memory")).to_have_count(2)
    page.locator(BULLETS).nth(1).locator(".memory-toggle").click()
    _saved(page)
    assert _node(live, b).props == {}
    page.reload()
    expect(page.locator(".outline li.is-memory")).to_have_count(1)


def test_hostile_text_renders_as_text(page: Page, live: LiveServer) -> None:
    xss = "<img src=x onerror=window.__pwned=1>"
    link = "javascript:alert(1)"
    pid, _ = _seed(live, xss, [xss, link])
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.goto(f"/p/{pid}")
    expect(page.locator(TEXTS).nth(0)).to_have_value(xss)
    expect(page.locator(TEXTS).nth(1)).to_have_value(link)
    expect(page.locator(".page-title")).to_have_value(xss)
    page.locator(TEXTS).nth(1).focus()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type(xss)  # typed, it is saved and shown as text too
    _saved(page)
    page.reload()
    expect(page.locator(TEXTS).nth(2)).to_have_value(xss)
    assert page.locator("#view img, #sidebar img").count() == 0
    assert page.locator("#view a[href^='javascript']").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_markdown_reads_rendered_and_safely_and_edits_as_written(
    page: Page, live: LiveServer
) -> None:
    hostile = [
        "Read [the guide](https://example.org/guide) and run `cargo publish` *today*.",
        "[click](javascript:alert(1)) [data](data:text/html,<script>alert(1)</script>) "
        "[file](file:///etc/passwd) <script>window.__pwned=1</script>",
        "![tracker](https://example.org/pixel.png) <img src=x onerror=window.__pwned=1> "
        "[**mail** us](mailto:team@example.org)",
        "```sh\ncargo login\ncargo publish\n```",
    ]
    pid, _ = _seed(live, "Rendered", hostile)
    page.on("dialog", lambda dialog: dialog.dismiss())
    page.goto(f"/p/{pid}")
    views = page.locator(".outline .bullet-view")
    expect(views.nth(0)).to_be_visible()
    expect(views.nth(0)).to_have_text("Read the guide and run cargo publish today.")
    link = views.nth(0).locator("a")
    expect(link).to_have_attribute("href", "https://example.org/guide")
    expect(link).to_have_attribute("rel", "noopener noreferrer nofollow")
    expect(views.nth(0).locator("code")).to_have_text("cargo publish")
    expect(views.nth(0).locator("em")).to_have_text("today")
    # Only http, https and mailto links are links; a tag is shown as the text it is.
    hrefs = page.locator(".bullet-view a").evaluate_all("els => els.map(e => e.href)")
    assert hrefs == ["https://example.org/guide", "mailto:team@example.org"]
    expect(views.nth(1)).to_contain_text("<script>window.__pwned=1</script>")
    expect(views.nth(2)).to_contain_text("tracker <img src=x onerror=window.__pwned=1> mail us")
    expect(views.nth(2).locator("a strong")).to_have_text("mail")
    expect(views.nth(3).locator("pre code")).to_have_text("cargo login\ncargo publish")
    assert page.locator("#view img, #view script").count() == 0
    assert page.evaluate("window.__pwned") is None
    # A click on the text (not on its link) edits the Markdown as written; leaving shows it again.
    views.nth(0).click(position={"x": 2, "y": 5})
    expect(page.locator(TEXTS).nth(0)).to_be_focused()
    expect(views.nth(0)).to_be_hidden()
    expect(page.locator(TEXTS).nth(0)).to_have_value(hostile[0])
    page.keyboard.press("ArrowDown")
    expect(page.locator(TEXTS).nth(1)).to_be_focused()  # the arrows reach a rendered bullet
    expect(views.nth(0)).to_be_visible()


def test_a_linked_wikilink_opens_its_page_in_the_app(page: Page, live: LiveServer) -> None:
    target, _ = _seed(live, "Zulu notes", ["The other page"])
    pid, _ = _seed(live, "Alpha", [f"See [the zulu page](/p/{target})."])
    page.goto(f"/p/{pid}")
    link = page.locator(".bullet-view a")
    expect(link).to_have_attribute("href", f"/p/{target}")
    expect(link).not_to_have_attribute("target", "_blank")
    link.click()
    expect(page.locator(".page-title")).to_have_value("Zulu notes")


def test_a_link_to_a_bullet_opens_its_ancestors_and_highlights_it(
    page: Page, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    made = commands.create_page(cx, "Deep")
    top = commands.add_node(cx, made.id, "top")
    mid = commands.add_node(cx, made.id, "mid", parent_id=top.id)
    leaf = commands.add_node(cx, made.id, "leaf", parent_id=mid.id)
    other = commands.add_node(cx, made.id, "other")
    page.goto(f"/p/{made.id}")
    # fold the top bullet; the fold is remembered for this page
    page.locator(f"[id='{top.id}'] > .bullet-row .bullet-toggle").click()
    expect(page.locator(f"[id='{leaf.id}']")).to_be_hidden()
    page.reload()
    expect(page.locator(f"[id='{top.id}'] > .bullet-row .bullet-toggle")).to_have_attribute(
        "aria-expanded", "false"
    )
    expect(page.locator(f"[id='{leaf.id}']")).to_be_hidden()
    toggle = page.locator(f"[id='{top.id}'] > .bullet-row .bullet-toggle")
    toggle.click()  # unfolded, the bullets that were hidden show their text at full height
    box = page.locator(f"[id='{leaf.id}'] .bullet-text").bounding_box()
    assert box is not None
    assert box["height"] > 10
    toggle.click()

    page.goto(f"/p/{made.id}#{leaf.id}")
    target = page.locator(f"[id='{leaf.id}']")
    expect(target).to_be_visible()
    expect(target).to_have_class("bullet is-flashed")
    expect(target.locator(".bullet-text")).to_be_focused()
    expect(target).not_to_have_class("bullet is-flashed", timeout=5000)
    # a hash change on the same page does the same
    page.evaluate(f"location.hash = '{other.id}'")
    expect(page.locator(f"[id='{other.id}']")).to_have_class("bullet is-flashed")


def test_two_windows_never_overwrite_each_other(page: Page, live: LiveServer) -> None:
    pid, (a, _) = _seed(live, "Shared", ["draft", "second"])
    page.goto(f"/p/{pid}")
    other = page.context.new_page()
    other.goto(f"/p/{pid}")
    theirs = other.locator(TEXTS).nth(0)
    theirs.fill("their version")
    _saved(other)

    mine = page.locator(TEXTS).nth(0)
    mine.focus()
    page.keyboard.press("End")
    page.keyboard.type(" with my words")
    notice = page.locator(".stale-notice")
    expect(notice).to_contain_text(
        "This page changed in another window; reloaded the newer version"
    )
    expect(notice.locator(".refused-text")).to_have_value("draft with my words")
    expect(page.locator(TEXTS).nth(0)).to_have_value("their version")
    assert _node(live, a).text == "their version"
    _saved(page)

    # the reloaded window goes on saving from the newer version
    page.locator(TEXTS).nth(1).fill("second, edited here")
    _saved(page)
    expect(page.locator(".stale-notice")).to_have_count(1)
    assert [t for t, _ in _tree(live, pid)] == ["their version", "second, edited here"]
    other.close()


def test_a_failed_save_shows_it_and_saves_on_retry(page: Page, live: LiveServer) -> None:
    pid, (a,) = _seed(live, "Flaky", ["before"])
    page.goto(f"/p/{pid}")
    failed: list[str] = []
    network_down = threading.Event()
    network_down.set()

    def refuse_while_down(route: Route) -> None:
        # Every save fails until the test has seen the page say so: the retries' timing
        # (1 s, then 2 s …) cannot outrun a slow check on a busy machine.
        if route.request.method == "PATCH" and network_down.is_set():
            failed.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/api/nodes/**", refuse_while_down)
    page.locator(TEXTS).nth(0).fill("after")
    expect(page.locator(".save-state")).to_have_text("Not saved — retrying")
    network_down.clear()
    expect(page.locator(TEXTS).nth(0)).to_have_value("after")
    _saved(page)
    assert failed and set(failed) == {f"{live.url}/api/nodes/{a}"}
    assert _node(live, a).text == "after"


def test_archive_delete_and_restore_from_the_header(page: Page, live: LiveServer) -> None:
    pid, _ = _seed(live, "Old notes", ["kept"])
    page.goto(f"/p/{pid}")
    sidebar = page.locator("#page-list a", has_text="Old notes")
    expect(sidebar).to_be_visible()
    page.click(".page-actions >> text=Archive")
    expect(page.locator(".page-banner")).to_contain_text("archived")
    expect(sidebar).to_have_count(0)
    page.click(".page-actions >> text=Delete")
    expect(page.locator(".page-banner")).to_contain_text("deleted")
    expect(page.locator(TEXTS).nth(0)).to_have_attribute("readonly", "")

    page.goto("/")
    page.check("#show-hidden-pages")
    hidden = page.locator("#page-list a", has_text="Old notes")
    expect(hidden).to_contain_text("deleted")
    hidden.click()
    page.click(".page-actions >> text=Restore")
    expect(page.locator(".page-banner")).to_be_empty()
    expect(page.locator(TEXTS).nth(0)).not_to_have_attribute("readonly", "")
    page.uncheck("#show-hidden-pages")
    expect(page.locator("#page-list a", has_text="Old notes")).to_have_text("Old notes")
    with live.database.pool.connection() as conn:
        ws = live.database.default_context(live.settings).actor.workspace_id
        restored = queries.get_page(conn, ws, UUID(pid))
    assert restored.archived_at is None
    assert restored.deleted_at is None
    assert restored.version == 4  # a bullet, archive, delete, restore


def test_renaming_updates_the_sidebar(page: Page, live: LiveServer) -> None:
    pid, _ = _seed(live, "Before", ["x"])
    page.goto(f"/p/{pid}")
    page.locator(".page-title").fill("After")
    expect(page.locator("#page-list a", has_text="After")).to_be_visible()
    _saved(page)
    expect(page).to_have_title("After · Subspace")


def test_a_bullet_typed_into_while_it_is_created_keeps_its_text(
    page: Page, live: LiveServer
) -> None:
    pid, _ = _seed(live, "Fast", ["first"])
    page.goto(f"/p/{pid}")

    def slow_create(route: Route) -> None:
        if route.request.method == "POST":
            time.sleep(0.6)  # the bullet's text is typed before the server made it
        route.continue_()

    page.route("**/api/nodes", slow_create)
    page.locator(TEXTS).nth(0).focus()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("typed at once")
    page.keyboard.press("Enter")
    page.keyboard.type("and another")
    _saved(page)
    assert [t for t, _ in _tree(live, pid)] == ["first", "typed at once", "and another"]


def test_a_refused_text_stays_marked_until_it_saves(page: Page, live: LiveServer) -> None:
    pid, (a,) = _seed(live, "Limits", ["short"])
    page.goto(f"/p/{pid}")
    bullet = page.locator(BULLETS).nth(0)
    too_long = "x" * (live.settings.max_node_chars + 1)
    bullet.locator(".bullet-text").fill(too_long)
    expect(page.locator(".save-state")).to_have_text("Not saved")
    expect(bullet).to_have_class("bullet is-unsaved")
    expect(page.locator("#toast")).to_contain_text("SUBSPACE_MAX_NODE_CHARS")
    expect(bullet.locator(".bullet-text")).to_have_value(too_long)  # kept in the editor
    # another change that goes through does not pass the refused text off as saved
    page.locator(".page-title").fill("Limits, renamed")
    page.wait_for_timeout(800)
    expect(page.locator(".save-state")).to_have_text("Not saved")
    bullet.locator(".bullet-text").fill("short again")
    _saved(page)
    expect(bullet).to_have_class("bullet")
    assert _node(live, a).text == "short again"


def test_a_page_of_ten_thousand_bullets_edits_folds_and_saves_like_a_small_one(
    page: Page, live: LiveServer
) -> None:
    from subspace.ingest.outline import OutlineItem

    cx = live.database.default_context(live.settings)
    releases = [
        OutlineItem(f"Release {r}", [OutlineItem(f"Fix {r}.{n}") for n in range(19)])
        for r in range(500)
    ]
    made = commands.create_page_from_outline(cx, "Changelog", releases)  # 10,000 bullets
    with live.database.pool.connection() as conn:
        row = conn.execute(
            "select id, parent_id from kb.nodes where page_id = %s and text = 'Fix 420.7'",
            (made.id,),
        ).fetchone()
    deep, release = row["id"], row["parent_id"]
    # Reached from a search hit deep inside it: built, shown, focused.
    page.goto(f"/p/{made.id}#{deep}")
    target = page.locator(f"[id='{deep}']")
    # Loading and building 10,000 bullets took over the usual 15 s once under the whole
    # suite's load (6.8 s for the whole test alone): a wait, not a timing.
    expect(target.locator(".bullet-text")).to_be_focused(timeout=BIG_PAGE_WAIT_MS)
    expect(target).to_be_in_viewport()
    page.keyboard.press("End")
    page.keyboard.type(" (again)")
    page.keyboard.press("Enter")  # a new bullet right after it, among its siblings
    page.keyboard.type("Fix 420.7b")
    page.locator(f"[id='{release}'] > .bullet-row .bullet-toggle").click()  # folds release 420
    expect(target).to_be_hidden()
    _saved(page)
    tree = _tree(live, str(made.id))
    assert len(tree) == 500
    assert [text for text, _ in tree[420][1][6:9]] == [
        "Fix 420.6",
        "Fix 420.7 (again)",
        "Fix 420.7b",
    ]
    # The last bullet is there too, and the keyboard reaches it from the one before.
    last = page.locator(TEXTS).last
    expect(last).to_have_value("Fix 499.18")
    page.locator(TEXTS).nth(-2).focus()
    page.keyboard.press("ArrowDown")
    expect(last).to_be_focused()


def test_a_big_page_is_built_a_screen_first_and_whole_when_the_tree_is_needed(
    page: Page, live: LiveServer
) -> None:
    # The outline alone, in the app's page: 10,000 bullets as the API sends them.
    built = page.evaluate(
        """async () => {
          const { Outline } = await import("/static/js/outline.js");
          const queue = { pendingText: 0, report() {}, push() {} };
          const nodes = Array.from({ length: 500 }, (_, r) => ({
            id: `r${r}`, text: `Release ${r}`, props: {},
            children: Array.from({ length: 19 }, (_, n) => ({
              id: `r${r}n${n}`, text: `Fix ${r}.${n}`, props: {}, children: [] })) }));
          const count = (o) => o.el.querySelectorAll("li.bullet").length;
          const seen = {};
          let outline = new Outline({ pageId: "big", nodes, queue });
          seen.first = count(outline);
          seen.deep = outline.byId.get("r420n7")?.text;  // an id asked: all of it built
          seen.afterId = count(outline);
          outline = new Outline({ pageId: "big2", nodes, queue });
          seen.shown = outline.visible().length;  // moving between bullets sees the whole page
          outline = new Outline({ pageId: "big3", nodes, queue });
          await new Promise((done) => setTimeout(done, 0));
          seen.oneSlice = count(outline);
          await new Promise((done) => {
            const wait = () => (outline.unbuilt.length ? setTimeout(wait, 10) : done());
            wait();
          });
          seen.later = count(outline);
          return seen;
        }"""
    )
    assert 0 < built["first"] < 1000  # the first screen, not the page
    assert built["deep"] == "Fix 420.7"
    assert built["afterId"] == built["shown"] == built["later"] == 10_000
    assert built["first"] < built["oneSlice"] < 10_000  # the rest a slice per task


def test_opening_a_big_page_draws_its_first_screen_before_the_rest(
    page: Page, live: LiveServer
) -> None:
    """Nothing the page view does as it opens (its live answer runs looked for, say) builds the
    whole outline before its first screen is drawn; its JSON is asked for once, as the app
    starts."""
    from subspace.ingest.outline import OutlineItem

    cx = live.database.default_context(live.settings)
    releases = [
        OutlineItem(f"Release {r}", [OutlineItem(f"Fix {r}.{n}") for n in range(19)])
        for r in range(100)
    ]
    made = commands.create_page_from_outline(cx, "Changelog", releases)  # 2,000 bullets
    page.add_init_script(
        """new MutationObserver((_, observer) => {
             const shown = document.querySelectorAll(".outline li.bullet").length;
             if (shown) { window.__firstShown = shown; observer.disconnect(); }
           }).observe(document, { subtree: true, childList: true });"""
    )
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if f"/api/pages/{made.id}" in r.url else 0)
    page.goto(f"/p/{made.id}")
    expect(page.locator(TEXTS).last).to_have_value("Fix 99.18")  # all of it, in the end
    assert 0 < page.evaluate("window.__firstShown") < 2_000
    assert len(asked) == 1  # fetched as the app starts, and taken by the view: not twice
