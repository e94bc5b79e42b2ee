"""The sidebar with imported folders: pages grouped by the folders they came from, sorting,
pins, the filter, and the open page's folders opened."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from subspace import commands
from subspace.commands.pages import resolve_kb
from subspace.ingest.outline import OutlineItem
from tests.browser.conftest import LiveServer

LIST = "#page-list"


def _top_level(page: Page) -> list[str]:
    """What the list shows at its top level, in order: page titles and folder names."""
    shown: list[str] = page.evaluate(
        """() => [...document.querySelectorAll('#page-list > li')].map((li) =>
          li.querySelector(':scope > .folder-toggle .folder-name')?.textContent
          ?? li.querySelector(':scope > a .page-title-text')?.firstChild?.textContent
          ?? li.querySelector('.page-group-name')?.textContent)"""
    )
    return shown


def test_imported_pages_sit_in_their_folders_sorted_pinned_and_filtered(
    page: Page, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    commands.create_page(cx, "Alpha notes")
    imported = {}
    for title, path in [("Install guide", "docs/guide/install.md"),
                        ("Upgrade guide", "docs/guide/upgrade.md"),
                        ("API reference", "docs/api.md")]:  # fmt: skip
        imported[title] = commands.create_page_from_outline(
            cx, title, [OutlineItem("x")], source_path=path
        )
    commands.create_page(cx, "Zeta plan")
    page.reload()
    expect(page.locator(LIST)).to_contain_text("Zeta plan")
    # Pages made in the app first (last changed first), then the folders, folded.
    assert _top_level(page) == ["Zeta plan", "Alpha notes", "docs"]
    docs = page.locator(".folder-toggle", has_text="docs")
    expect(docs.locator(".folder-count")).to_have_text("3")
    expect(page.locator(LIST)).not_to_contain_text("API reference")
    docs.click()
    expect(docs).to_have_attribute("aria-expanded", "true")
    expect(page.locator(LIST)).to_contain_text("API reference")
    guide = page.locator(".folder-toggle", has_text="guide")
    expect(guide.locator(".folder-count")).to_have_text("2")
    guide.click()
    expect(page.locator(LIST)).to_contain_text("Install guide")

    page.select_option("#page-sort", "title")
    assert _top_level(page) == ["Alpha notes", "Zeta plan", "docs"]

    page.fill("#page-filter", "GUIDE")  # anywhere in a title, case aside
    rows = page.locator(f"{LIST} > li.page-row")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".page-folder")).to_have_text("docs › guide")
    page.fill("#page-filter", "zzz")
    expect(page.locator(LIST)).to_contain_text("No page matches.")
    page.fill("#page-filter", "")

    upgrade = page.locator(f"{LIST} a[data-page-id='{imported['Upgrade guide'].id}'] + .pin")
    upgrade.first.click()
    expect(page.locator(".page-group", has_text="Pinned")).to_contain_text("Upgrade guide")
    page.reload()  # pins, the sort and the open folders are kept in this browser
    expect(page.locator(".page-group", has_text="Pinned")).to_contain_text("Upgrade guide")
    assert _top_level(page)[:2] == ["Pinned", "Alpha notes"]
    expect(page.locator(".folder-toggle", has_text="guide")).to_have_attribute(
        "aria-expanded", "true"
    )
    page.locator(".page-group .pin").click()  # unpinned
    expect(page.locator(".page-group")).to_have_count(0)

    # Opening a page inside folded folders opens them and marks the page.
    docs = page.locator(".folder-toggle", has_text="docs")
    docs.click()
    expect(docs).to_have_attribute("aria-expanded", "false")
    page.goto(f"/p/{imported['Install guide'].id}")
    current = page.locator(f"{LIST} a[aria-current]")
    expect(current).to_contain_text("Install guide")
    expect(current).to_be_visible()


def test_a_sidebar_of_five_thousand_pages_lists_filters_and_scrolls(
    page: Page, live: LiveServer
) -> None:
    """1,000 pages made in the app and 4,000 imported into twenty folders (bench/big_pages.py
    times the same list)."""
    cx = live.database.default_context(live.settings)
    with cx.transaction() as conn:
        kb = resolve_kb(cx, conn, None)
        conn.execute(
            "insert into kb.pages (workspace_id, kb_id, title, source_path) "
            "select %(ws)s, %(kb)s, "
            "case when n < 1000 then 'Note ' || n else 'Manual page ' || n end, "
            "case when n >= 1000 then 'docs/area-' || n %% 20 || '/page-' || n || '.md' end "
            "from generate_series(0, 4999) n",
            {"ws": cx.actor.workspace_id, "kb": kb},
        )
    page.reload()
    docs = page.locator(".folder-toggle", has_text="docs")
    expect(docs.locator(".folder-count")).to_have_text("4000")
    expect(page.locator(f"{LIST} > li.page-row")).to_have_count(1000)  # the rest folded away
    docs.scroll_into_view_if_needed()  # the list scrolls to its end
    expect(docs).to_be_in_viewport()
    docs.click()
    area = page.locator(".folder-toggle", has_text="area-7")
    expect(area.locator(".folder-count")).to_have_text("200")

    page.fill("#page-filter", "page 1234")
    rows = page.locator(f"{LIST} > li.page-row")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".page-folder")).to_have_text("docs › area-14")
    page.fill("#page-filter", "manual page")  # 4,000 matches: the first 200 drawn, the rest counted
    expect(rows).to_have_count(200)
    expect(page.locator(".page-more")).to_have_text("3,800 more: type more of the title.")
    rows.last.scroll_into_view_if_needed()
    expect(rows.last).to_be_in_viewport()
