"""The shell: signing in and out, the sidebar, escaping, and cross-site writes."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from subspace import commands
from tests.browser.conftest import LiveServer


def test_sign_in_shows_the_sidebar_and_sign_out_clears_the_cookie(
    page: Page, live: LiveServer
) -> None:
    cx = live.database.default_context(live.settings)
    commands.create_page(cx, "Quarterly planning")
    commands.create_page(cx, "Reading list")
    page.reload()
    pages = page.locator("#page-list a")
    expect(pages).to_have_count(2)
    page.fill("#page-filter", "quart")
    expect(pages).to_have_count(1)
    expect(pages.first).to_have_text("Quarterly planning")
    assert "?token" not in page.url  # the key does not linger in the address bar or history

    page.click("text=Sign out")
    expect(page.locator("h1")).to_have_text("Subspace")
    assert not [c for c in page.context.cookies() if c["name"] == "subspace_key"]
    page.goto("/files")
    expect(page.locator(".signin")).to_be_visible()


def test_a_stale_link_explains_how_to_get_a_new_one(page: Page, live: LiveServer) -> None:
    page.goto("/?token=ssk_not_a_key")
    expect(page.locator(".signin .notice-error")).to_contain_text("not valid any more")
    expect(page.locator(".signin")).to_contain_text("subspace serve")


def test_titles_render_as_text(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    commands.create_page(cx, "<img src=x onerror=window.__pwned=1>")
    page.reload()
    expect(page.locator("#page-list a")).to_have_text("<img src=x onerror=window.__pwned=1>")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#page-list img").count() == 0


def test_a_write_from_another_origin_is_refused(live: LiveServer) -> None:
    cookies = {"subspace_key": live.token}
    foreign = httpx.post(
        f"{live.url}/api/pages",
        json={"title": "planted"},
        cookies=cookies,
        headers={"origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert "another site" in foreign.json()["error"]["message"]
    bare = httpx.post(f"{live.url}/api/pages", json={"title": "planted"}, cookies=cookies)
    assert bare.status_code == 403
    own = httpx.post(
        f"{live.url}/api/pages",
        json={"title": "mine"},
        cookies=cookies,
        headers={"origin": live.url},
    )
    assert own.status_code == 201
    with_key = httpx.post(
        f"{live.url}/api/pages",
        json={"title": "scripted"},
        headers={"authorization": f"Bearer {live.token}", "origin": "http://evil.example"},
    )
    assert with_key.status_code == 201
