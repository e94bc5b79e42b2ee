"""What a person does first: type a bullet, find it with the palette, tag the page."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import LiveServer


def test_a_typed_bullet_is_found_by_the_palette_and_opens_highlighted(
    page: Page, live: LiveServer
) -> None:
    page.click("#new-page")
    title = page.locator(".page-title")
    title.fill("Field trip")
    title.press("Enter")
    page.keyboard.type("Spotted a kingfisher near the weir")
    page.keyboard.press("Enter")
    page.keyboard.type("Bring waders next time")
    expect(page.locator(".save-state")).to_have_text("Saved")
    page_id = page.url.rsplit("/p/", 1)[1]

    page.goto("/")  # away from the page, so opening the row has somewhere to go
    page.keyboard.press("Control+k")
    page.locator("#palette-input").type("kingfisher")
    row = page.locator("#palette-list [role=option]").first
    expect(row).to_contain_text("Field trip")
    expect(row.locator("mark")).to_have_text("kingfisher")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/p/{page_id}#[0-9a-f-]{{36}}$"))
    flashed = page.locator(".outline li.is-flashed .bullet-text")
    expect(flashed).to_have_value("Spotted a kingfisher near the weir")
    expect(flashed).to_be_focused()


def test_a_page_takes_tags(page: Page, live: LiveServer) -> None:
    page.click("#new-page")
    panel = page.locator(".page-tags .tags-panel")
    expect(panel.locator(".tag-chip")).to_have_count(0)
    panel.locator(".tag-add").click()
    panel.locator(".tag-define input").fill("status")
    panel.locator(".tag-define select").select_option("text")
    panel.locator(".tag-define button").click()
    panel.locator(".tag-set input").fill("draft")
    panel.locator(".tag-set button").click()
    expect(panel.locator(".tag-chip")).to_have_text("status draft ×")
    page_id = page.url.rsplit("/p/", 1)[1]
    values = page.request.get(f"/api/tags/values/page/{page_id}").json()
    assert [(v["name"], v["value"]) for v in values] == [("status", "draft")]
    page.click("[aria-label='Clear tag status']")
    expect(panel.locator(".tag-chip")).to_have_count(0)
