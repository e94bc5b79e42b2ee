"""Browser tests: the app served by a real uvicorn on a free port, driven by headless Chromium.

Debian's Chromium is used (`apt-get install -y chromium`; `make test` installs it when it runs
as root). Without it these tests skip and say how to get it.
"""

from __future__ import annotations

import shutil
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from subspace.api import create_app
from subspace.api.auth import COOKIE_NAME
from subspace.config import Settings
from subspace.database import Database
from subspace.keys import create_key
from subspace.sessions import create_signin_code, start_session
from tests.conftest import free_port, serving

# Generous waits: a test still fails when what it waits for never comes, but a machine busy with
# other work (two cores, a server and Chromium in one process) does not make it fail.
ACTION_TIMEOUT_MS = 20_000
expect.set_options(timeout=15_000)

CHROMIUM = shutil.which("chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if CHROMIUM is None:
    pytest.skip(
        "Chromium is missing: run `apt-get install -y chromium` (make test does when root).",
        allow_module_level=True,
    )


# Made once: each httpx client would otherwise load the system's certificates (~25 ms).
_TLS = ssl.create_default_context()


@dataclass
class LiveServer:
    url: str
    token: str
    database: Database
    settings: Settings

    def signin_path(self) -> str:
        """The path of a sign-in link with a new one-time code, as `subspace signin` prints."""
        with self.database.pool.connection() as conn:
            actor = self.database.default_context(self.settings).actor
            return f"/signin?code={create_signin_code(conn, actor, 5)}"

    def session_cookie(self) -> dict[str, str]:
        """The cookie of a new browser session, for a client that is not a browser."""
        with self.database.pool.connection() as conn:
            actor = self.database.default_context(self.settings).actor
            _, token = start_session(conn, create_signin_code(conn, actor, 5), days=1)
        return {COOKIE_NAME: token}

    def api(self) -> httpx.Client:
        """An HTTP client of the server's API, signed in with its key."""
        return httpx.Client(
            base_url=self.url, headers={"authorization": f"Bearer {self.token}"}, verify=_TLS
        )


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def live(database: Database, settings: Settings) -> Iterator[LiveServer]:
    """The whole app (API, web, indexer, extraction) on 127.0.0.1 and a free port."""
    yield from _serve(database, settings)


@pytest.fixture
def dead_provider_settings(settings: Settings) -> Settings:
    """Settings whose embedding provider (openai) points at a closed local port."""
    return replace(
        settings,
        providers="openai",
        openai_api_key="sk-test-not-a-key",
        openai_base_url=f"http://127.0.0.1:{free_port()}/v1",
    )


@pytest.fixture
def live_dead_provider(
    database: Database, dead_provider_settings: Settings
) -> Iterator[LiveServer]:
    """The whole app with an embedding provider that never answers: searches are degraded."""
    yield from _serve(database, dead_provider_settings)


@pytest.fixture
def live_without_lexical_index(
    database: Database, settings: Settings, tmp_path: Path
) -> Iterator[LiveServer]:
    """The whole app with its lexical index folder where no folder can be made (a file is
    there): the index is never built, and keyword search ranks in Postgres."""
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")
    yield from _serve(database, replace(settings, lexical_dir=blocked / "lexical"))


def _serve(database: Database, settings: Settings) -> Iterator[LiveServer]:
    with serving(create_app(settings, database)) as port:
        with database.pool.connection() as conn:
            _, token = create_key(conn, database.default_context(settings).actor, "browser")
        yield LiveServer(f"http://127.0.0.1:{port}", token, database, settings)


@pytest.fixture
def page(browser: Browser, live: LiveServer) -> Iterator[Page]:
    """A signed-in tab: the sign-in link was opened, so the session cookie is set."""
    yield from signed_in_tab(browser, live)


def item_views(ids: dict[str, str]) -> list[tuple[str, str, str]]:
    """The views of a page, a file and a mail (`ids` by kind) and the lists holding them: each
    view's name, path, and an element that shows it is drawn."""
    return [
        ("page", f"/p/{ids['page']}", ".outline"),
        ("files", "/files", ".file-table"),
        ("file", f"/files/{ids['file']}", ".chunk"),
        ("mail", "/mail", ".mail-table"),
        ("message", f"/mail/{ids['mail']}", ".mail-body"),
        ("sources", "/sources", ".source-card .source-last"),
    ]


def add_sources(live: LiveServer, folder: Path) -> None:
    """A watched folder (its path long) and a mailbox whose password the server cannot read
    (it has no SUBSPACE_SOURCES_KEY): the Sources view shows a card in sync and one paused,
    with its reason and the form that gives the password again."""
    from subspace.sources import model
    from subspace.sources.secrets import new_key

    cx = live.database.default_context(replace(live.settings, sources_key=new_key()))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ferry.md").write_text("# Ferry\n\n- the winter ferry leaves at nine\n")
    model.add_source(cx, "Operations notes", "folder", model.folder_config(str(folder)))
    folders = ["INBOX", "Projects/Winter timetable and pier changes"]
    user = "ana.lucia.fernandez-whitaker@example.com"
    config = model.imap_config("127.0.0.1", port=9, tls="none", user=user, folders=folders)
    model.add_source(cx, "Ana's work mail", "imap", config, password="an app token")
    deadline = time.monotonic() + 30
    with live.database.pool.connection() as conn:
        while conn.execute("select 1 from kb.sources where status = 'waiting'").fetchone():
            assert time.monotonic() < deadline, "the sources were never synced"
            time.sleep(0.1)


def import_mail(api: httpx.Client, eml: bytes) -> str:
    """Import one message through the API; its id."""
    answer = api.post("/api/mail/import", files={"file": ("message.eml", eml, "message/rfc822")})
    assert answer.status_code == 200, answer.text
    mail_id: str = api.get("/api/mail").json()[0]["id"]
    return mail_id


def wait_for_files(api: httpx.Client, timeout_s: float = 30) -> None:
    """Return once no file of the workspace is still being read."""
    deadline = time.monotonic() + timeout_s
    while any(f["status"] == "processing" for f in api.get("/api/files").json()):
        assert time.monotonic() < deadline, f"files still being read after {timeout_s} s"
        time.sleep(0.1)


def sign_in_tab(tab: Page, live: LiveServer) -> None:
    """Open a sign-in link in `tab` and press Sign in, as a person does."""
    tab.goto(live.signin_path())
    # The shell's scripts run before "load": waiting for it, not for an element, means
    # the keyboard shortcuts are listening when a test presses them.
    with tab.expect_navigation(wait_until="load"):
        tab.click("button[type=submit]")
    tab.wait_for_selector("#page-list", state="attached")  # hidden in a narrow drawer


def sign_out(tab: Page) -> None:
    """Forget the tab's session. The app is left first: signed out, its next request
    would send it to /signin and abort whatever navigation the test starts."""
    tab.goto("about:blank")
    tab.context.clear_cookies()


def signed_in_tab(browser: Browser, live: LiveServer) -> Iterator[Page]:
    """A tab of its own browser context on `live`, signed in through its sign-in link."""
    context = browser.new_context(base_url=live.url)
    tab = context.new_page()
    tab.set_default_timeout(ACTION_TIMEOUT_MS)
    sign_in_tab(tab, live)
    yield tab
    context.close()
