"""/docs and /redoc render in a browser that can reach no other host, and Swagger UI's
Authorize sends the key."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.browser.conftest import ACTION_TIMEOUT_MS, LiveServer


@pytest.fixture
def offline(browser: Browser, live: LiveServer) -> Iterator[tuple[Page, list[str]]]:
    """A tab without a session whose every request to another host fails; the list holds
    those requests."""
    context = browser.new_context(base_url=live.url)
    outside: list[str] = []

    def only_this_server(route: Route) -> None:
        if route.request.url.startswith(live.url + "/"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", only_this_server)
    tab = context.new_page()
    tab.set_default_timeout(ACTION_TIMEOUT_MS)
    yield tab, outside
    context.close()


def test_swagger_ui_renders_offline_and_authorize_sends_the_key(
    offline: tuple[Page, list[str]], live: LiveServer
) -> None:
    page, outside = offline
    page.goto("/docs")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() >= 40

    page.click("button.authorize")
    bearer = page.locator(".auth-container").first
    expect(bearer).to_contain_text("bearer")
    bearer.locator("input").fill(live.token)
    bearer.locator("button.authorize").click()
    # Swagger UI took the key: it offers to remove it.
    expect(bearer.get_by_role("button", name="Remove authorization")).to_be_visible()
    page.click("button.close-modal")

    listing = page.locator(
        "#operations-knowledge_bases-list_knowledge_bases_api_knowledge_bases_get"
    )
    listing.locator(".opblock-summary").click()
    listing.locator("button.try-out__btn").click()
    listing.locator("button.execute").click()
    status = listing.locator(".live-responses-table td.response-col_status:not(.col_header)")
    expect(status.first).to_have_text("200")
    assert outside == []


def test_redoc_renders_offline(offline: tuple[Page, list[str]]) -> None:
    page, outside = offline
    page.goto("/redoc")
    expect(page.locator("h2", has_text="List Knowledge Bases")).to_be_visible()
    assert outside == []
