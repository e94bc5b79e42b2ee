"""The app served for a benchmark's browser: a real uvicorn in a thread on a free port, and a
person signed in with a key."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import uvicorn

from bench.hostile import free_port
from subspace.api import create_app

if TYPE_CHECKING:
    from playwright.sync_api import Page

    from subspace.config import Settings
    from subspace.database import Database


@contextmanager
def served(settings: Settings, db: Database) -> Iterator[str]:
    """The app over `db` on a real uvicorn until the block ends; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, db), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def sign_in(page: Page, token: str) -> None:
    """Sign `page`'s browser in as a person does with a key: pasted into the sign-in page."""
    page.goto("/signin")
    page.fill("#signin-code", token)
    page.click("button[type=submit]")
    page.wait_for_selector("#page-list")
