"""The shell: signing in and out, the sidebar, escaping, and cross-site writes."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from subspace import commands
from subspace.api.auth import COOKIE_NAME
from subspace.sessions import list_sessions
from tests.browser.conftest import LiveServer, sign_out


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
    assert "code=" not in page.url  # the code does not linger in the address bar or history
    [cookie] = [c for c in page.context.cookies() if c["name"] == COOKIE_NAME]
    assert cookie["value"].startswith("sss_") and cookie["httpOnly"]  # a session, not a key
    with live.database.pool.connection() as conn:
        signed_in = list_sessions(conn, cx.actor.workspace_id)
    assert len(signed_in) == 1

    page.click("text=Sign out")
    expect(page.locator("h1")).to_have_text("Subspace")
    assert not [c for c in page.context.cookies() if c["name"] == COOKIE_NAME]
    with live.database.pool.connection() as conn:
        assert list_sessions(conn, cx.actor.workspace_id) == []  # signing out ended it
    page.goto("/files")
    expect(page.locator(".signin")).to_be_visible()


def test_a_used_link_says_so_and_a_pasted_key_signs_in(page: Page, live: LiveServer) -> None:
    link = live.signin_path()
    sign_out(page)
    page.goto(link)
    page.click("button[type=submit]")
    page.wait_for_selector("#page-list")
    sign_out(page)
    page.goto(link)  # the same link again: its code was spent
    expect(page.locator(".signin .notice-error")).to_contain_text("already used")
    expect(page.locator(".signin")).to_contain_text("subspace signin")
    page.fill("#signin-code", live.token)
    page.click("button[type=submit]")
    page.wait_for_selector("#page-list")
    [cookie] = [c for c in page.context.cookies() if c["name"] == COOKIE_NAME]
    assert live.token not in cookie["value"]


def test_an_old_link_carrying_a_key_signs_nobody_in(page: Page, live: LiveServer) -> None:
    sign_out(page)
    page.goto(f"/?token={live.token}")
    expect(page.locator(".signin .notice-error")).to_contain_text("no longer carry an API key")
    assert not page.context.cookies()


def test_titles_render_as_text(page: Page, live: LiveServer) -> None:
    cx = live.database.default_context(live.settings)
    commands.create_page(cx, "<img src=x onerror=window.__pwned=1>")
    page.reload()
    expect(page.locator("#page-list a")).to_have_text("<img src=x onerror=window.__pwned=1>")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#page-list img").count() == 0


def test_a_write_from_another_origin_is_refused(live: LiveServer) -> None:
    cookies = live.session_cookie()
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
