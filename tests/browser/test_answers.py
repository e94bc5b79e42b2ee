"""Answers in the browser: the palette's Ask row, "/rag …" filed as a bullet, the answer bullets
streaming in under it with their citations, cancelling, and answers shown as text only."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Browser, Locator, Page, Request, Route, expect

from subspace.answers.strategy import Answer, AnswerBullet, Job
from subspace.api import create_app
from subspace.config import Settings
from subspace.database import Database
from subspace.keys import create_key
from subspace.providers.chat import ChatError
from tests.browser.conftest import LiveServer, signed_in_tab
from tests.conftest import serving

WAIT_S = 20.0  # longest a scripted answer waits for the test to let it go on


@dataclass
class Script:
    """A strategy the test drives: it reports a tool step, writes `bullets[0]`, then waits for
    `release` (or for the run to be cancelled) before writing the rest."""

    name: str = "rag"
    bullets: list[AnswerBullet] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    wait_for_cancel: bool = False
    fail: str | None = None  # the chat model's error, raised after the first bullet

    def answer(self, job: Job) -> Answer:
        job.progress.step("tool", f"kb.search {job.question}: 1 hit", {"tool": "kb.search"})
        first, *rest = self.bullets
        job.progress.bullet(first)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not self.release.is_set():
            if self.wait_for_cancel and job.progress.cancelled():
                break
            time.sleep(0.05)
        if self.fail:
            raise ChatError(self.fail, reason="auth")
        for bullet in rest:
            job.progress.bullet(bullet)  # raises Cancelled once the run was cancelled
        return Answer(found=True, bullets=list(self.bullets))


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def scripted(database: Database, settings: Settings, script: Script) -> Iterator[LiveServer]:
    """The whole app, answering every strategy with the test's script."""
    app = create_app(settings, database)
    app.state.run_engine_options = {
        "strategies": {name: script for name in ("rag", "rag-pageindex", "rag-direct")}
    }
    with serving(app) as port:
        with database.pool.connection() as conn:
            _, token = create_key(conn, database.default_context(settings).actor, "browser")
        yield LiveServer(f"http://127.0.0.1:{port}", token, database, settings)
        script.release.set()


@pytest.fixture
def tab(browser: Browser, scripted: LiveServer) -> Iterator[Page]:
    """A signed-in tab on the scripted server."""
    yield from signed_in_tab(browser, scripted)


def _page(live: LiveServer, title: str, *texts: str) -> tuple[str, list[str]]:
    """A page with top-level bullets; its id and theirs."""
    with live.api() as api:
        page_id = api.post("/api/pages", json={"title": title}).json()["id"]
        ids = []
        for text in texts:
            answer = api.post("/api/nodes", json={"page_id": page_id, "text": text})
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
    return page_id, ids


def _command(tab: Page, text: str) -> str:
    """The selector of the bullet whose field holds `text`."""
    handle = tab.wait_for_function(
        """text => [...document.querySelectorAll("li.bullet")]
            .find(li => li.querySelector(":scope > .bullet-row > textarea").value === text)?.id""",
        arg=text,
    )
    return f'li.bullet[id="{handle.json_value()}"]'


def _palette(tab: Page) -> None:
    tab.keyboard.press("Control+k")
    expect(tab.locator("#palette-input")).to_be_focused()


def _answers(tab: Page, command: str) -> Locator:
    return tab.locator(f"{command} > .outline-children > li.is-answer > .bullet-row > textarea")


def test_the_palette_asks_on_the_open_page_and_the_answer_streams_in(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    page_id, (cited,) = _page(scripted, "Volcano notes", "Etna's observatory logs tremors nightly")
    script.bullets = [
        AnswerBullet("The observatory logs tremors every night.", [f"node:{cited}"]),
        AnswerBullet("It is on Etna.", [f"node:{cited}", f"page:{page_id}"]),
    ]
    tab.goto(f"/p/{page_id}")
    tab.evaluate("window.sameDocument = true")  # gone if the page reloads
    _palette(tab)
    tab.keyboard.type("what does the observatory log?")
    expect(tab.locator(".palette-ask")).to_contain_text("Ask /rag")
    tab.keyboard.press("Shift+Enter")
    expect(tab.locator(".palette")).to_have_count(0)
    command = _command(tab, "/rag what does the observatory log?")
    answers = _answers(tab, command)
    # The first bullet is on the page while the run still goes on: it streamed in.
    expect(answers).to_have_count(1)
    expect(answers.first).to_have_value("The observatory logs tremors every night.")
    expect(tab.locator(f"{command} > .run-status .run-cancel")).to_be_visible()
    expect(tab.locator(f"{command} > .run-status")).to_contain_text("kb.search")
    # typing while the answer is written: the page's writes follow the run's, none is refused
    tab.locator(f'li.bullet[id="{cited}"] textarea').click()
    tab.keyboard.press("End")
    tab.keyboard.type(" (checked)")
    expect(tab.locator(".save-state")).to_have_text("Saved")
    expect(tab.locator(".stale-notice")).to_have_count(0)
    script.release.set()
    expect(answers).to_have_count(2)
    expect(tab.locator(f"{command} > .run-status")).to_contain_text("Answered.")
    expect(tab.locator(f"{command} > .run-status .run-cancel")).to_have_count(0)
    assert tab.evaluate("window.sameDocument") is True
    node_id = command.split('"')[1]
    assert tab.url.endswith(f"/p/{page_id}#{node_id}")
    # The answer is the page's own now: it is there after a reload, with its sources.
    tab.reload()
    answers = _answers(tab, command)
    expect(answers).to_have_count(2)
    second = tab.locator(f"{command} > .outline-children > li.is-answer").nth(1)
    expect(second.locator(".citation")).to_have_text(["[1]", "[2]"])
    expect(tab.locator(f'li.bullet[id="{cited}"] textarea')).to_have_value(
        "Etna's observatory logs tremors nightly (checked)"
    )


def test_without_an_open_page_the_question_goes_to_a_questions_page(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    _, (cited,) = _page(scripted, "Orchard", "The pear trees flower in April")
    script.bullets = [AnswerBullet("They flower in April.", [f"node:{cited}"])]
    script.release.set()
    tab.goto("/files")
    _palette(tab)
    tab.keyboard.type("when do the pear trees flower?")
    expect(tab.locator(".palette-ask")).to_contain_text("when do the pear trees flower?")
    tab.locator(".palette-ask").click()
    expect(tab.locator(".page-title")).to_have_value("Questions")
    command = _command(tab, "/rag when do the pear trees flower?")
    expect(_answers(tab, command)).to_have_count(1)
    expect(tab.locator("#page-list")).to_contain_text("Questions")


def test_a_citation_lands_on_the_cited_bullet(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    source_page, (_, cited) = _page(
        scripted, "Harbour log", "Boats leave at dawn", "The ferry to Capri runs at 9:40"
    )
    script.bullets = [AnswerBullet("The ferry runs at 9:40.", [f"node:{cited}"])]
    script.release.set()
    asking_page, _ = _page(scripted, "Trip planning", "Questions for the trip")
    tab.goto(f"/p/{asking_page}")
    _palette(tab)
    tab.keyboard.type("when does the Capri ferry run?")
    tab.keyboard.press("Shift+Enter")
    command = _command(tab, "/rag when does the Capri ferry run?")
    citation = tab.locator(f"{command} li.is-answer .citation").first
    expect(citation).to_have_attribute("href", f"/p/{source_page}#{cited}")
    # The run's end reads the page again and draws it anew: a click during that lands on the
    # bullets being replaced (a loaded machine made it miss), so the test waits for it.
    expect(tab.locator(f"{command} > .run-status")).to_contain_text("Answered.")
    tab.wait_for_load_state("networkidle")
    citation.click()
    target = tab.locator(f'li.bullet[id="{cited}"]')
    expect(target).to_have_class("bullet is-flashed")
    expect(target.locator(":scope > .bullet-row > textarea")).to_be_focused()
    assert tab.url.endswith(f"/p/{source_page}#{cited}")


def test_filing_rag_direct_as_a_bullet_answers_under_it(page: Page, live: LiveServer) -> None:
    page_id, (fact,) = _page(live, "Lighthouse", "The lighthouse keeper winds the clock at noon")
    page.goto(f"/p/{page_id}")
    field = page.locator("textarea.bullet-text").first
    field.click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("/rag-direct when does the lighthouse keeper wind the clock?")
    page.keyboard.press("Enter")
    command = _command(page, "/rag-direct when does the lighthouse keeper wind the clock?")
    answers = page.locator(f"{command} > .outline-children > li.is-answer")
    expect(answers.first).to_be_visible(timeout=20_000)
    expect(page.locator(f"{command} > .run-status")).to_contain_text("Answered.", timeout=20_000)
    citing = answers.filter(has=page.locator(f'.citation[data-ref="node:{fact}"]'))
    expect(citing).to_have_count(1)
    assert "noon" in citing.locator("textarea").input_value()
    # the bullets typed around the run are saved: nothing was refused as stale
    expect(page.locator(".save-state")).to_have_text("Saved")
    expect(page.locator(".stale-notice")).to_have_count(0)
    with live.api() as api:
        nodes = api.get(f"/api/pages/{page_id}").json()["nodes"]
    asked = next(n for n in nodes if n["text"].startswith("/rag-direct"))
    assert any(f"node:{fact}" in child["props"]["refs"] for child in asked["children"])


def test_a_command_typed_while_its_bullet_is_created_is_saved_once_before_the_ask(
    page: Page, live: LiveServer
) -> None:
    """A slow create made the bullet's text save again after the ask: a write the answers
    being written could make stale ("This page changed in another window")."""
    page_id, _ = _page(live, "Lighthouse", "The lighthouse keeper winds the clock at noon")
    page.goto(f"/p/{page_id}")
    sent: list[str] = []
    held: list[Route] = []
    page.route("**/api/nodes", lambda route: held.append(route))  # creates wait for the test
    page.on(
        "request", lambda request: sent.append(f"{request.method} {urlparse(request.url).path}")
    )
    page.locator("textarea.bullet-text").first.click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    page.keyboard.type("/rag-direct when does the lighthouse keeper wind the clock?")
    page.keyboard.press("Enter")  # files the command and opens the bullet after it
    page.wait_for_function("() => true")  # the held create has reached the test
    held.pop().continue_()  # the command's bullet is made; its text is saved next
    page.wait_for_timeout(800)  # longer than the typing pause, the next bullet still held
    for route in held:
        route.continue_()
    page.unroute("**/api/nodes")
    command = _command(page, "/rag-direct when does the lighthouse keeper wind the clock?")
    expect(page.locator(f"{command} > .run-status")).to_contain_text("Answered.", timeout=20_000)
    expect(page.locator(".save-state")).to_have_text("Saved")
    command_id = page.locator(command).get_attribute("id")
    asked = sent.index("POST /api/ask")
    assert f"PATCH /api/nodes/{command_id}" in sent[:asked]
    assert f"PATCH /api/nodes/{command_id}" not in sent[asked:]
    expect(page.locator(".stale-notice")).to_have_count(0)


def test_an_answer_is_text_and_fetches_nothing_from_other_hosts(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    page_id, (cited,) = _page(scripted, "Press kit", "The logo is on the press kit page")
    markdown = (
        "Logo: ![x](http://example.com/a.png) see [the kit](http://example.com/kit) <b>bold</b>"
    )
    script.bullets = [AnswerBullet(markdown, [f"node:{cited}"])]
    script.release.set()
    elsewhere: list[str] = []

    def block(route: Route, request: Request) -> None:
        if urlparse(request.url).hostname != "127.0.0.1":
            elsewhere.append(request.url)
            route.abort()
        else:
            route.continue_()

    tab.route("**/*", block)
    tab.goto(f"/p/{page_id}")
    _palette(tab)
    tab.keyboard.type("where is the logo?")
    tab.keyboard.press("Shift+Enter")
    command = _command(tab, "/rag where is the logo?")
    expect(_answers(tab, command)).to_have_count(1)
    expect(_answers(tab, command)).to_have_value(markdown)
    expect(tab.locator(f"{command} > .run-status")).to_contain_text("Answered.")
    tab.reload()  # the answer as the page holds it, drawn from the stored bullets
    expect(_answers(tab, command)).to_have_count(1)
    expect(_answers(tab, command)).to_have_value(markdown)
    tab.wait_for_timeout(300)
    assert tab.locator("img").count() == 0
    assert tab.locator('a[href*="example.com"]').count() == 0
    assert tab.locator("b").count() == 0
    assert elsewhere == []


def test_cancel_stops_the_run_and_keeps_what_it_wrote(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    page_id, (cited,) = _page(scripted, "Long question", "A fact worth citing")
    script.wait_for_cancel = True
    script.bullets = [
        AnswerBullet("Written before the cancel.", [f"node:{cited}"]),
        AnswerBullet("Never written.", [f"node:{cited}"]),
    ]
    tab.goto(f"/p/{page_id}")
    field = tab.locator("textarea.bullet-text").first
    field.click()
    tab.keyboard.press("End")
    tab.keyboard.press("Enter")
    tab.keyboard.type("/rag-pageindex what is worth citing?")
    tab.keyboard.press("Enter")
    command = _command(tab, "/rag-pageindex what is worth citing?")
    answers = _answers(tab, command)
    expect(answers).to_have_count(1)
    expect(answers).to_have_value("Written before the cancel.")
    tab.locator(f"{command} > .run-status .run-cancel").click()
    expect(tab.locator(f"{command} > .run-status")).to_contain_text("Cancelled")
    expect(tab.locator(f"{command} > .run-status .run-cancel")).to_have_count(0)
    tab.reload()
    expect(_answers(tab, command)).to_have_count(1)
    expect(_answers(tab, command)).to_have_value("Written before the cancel.")
    with scripted.api() as api:
        run_id = api.get(f"/api/pages/{page_id}").json()["nodes"][1]["children"][0]["props"]["run"]
        assert api.get(f"/api/runs/{run_id}").json()["status"] == "cancelled"


def test_opening_a_page_whose_run_goes_on_resumes_its_stream(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    page_id, (cited,) = _page(scripted, "Resume", "Tides turn twice a day")
    script.bullets = [
        AnswerBullet("Twice a day.", [f"node:{cited}"]),
        AnswerBullet("Every twelve hours or so.", [f"node:{cited}"]),
    ]
    with scripted.api() as api:
        asked = api.post(
            "/api/ask", json={"question": "how often do tides turn?", "page_id": page_id}
        )
        assert asked.status_code == 202, asked.text
        node_id = asked.json()["node_id"]
        deadline = time.monotonic() + 10
        while not api.get(f"/api/runs/{asked.json()['run_id']}").json()["answer"]:
            assert time.monotonic() < deadline, "the run wrote nothing"
            time.sleep(0.05)
    tab.goto(f"/p/{page_id}")
    command = f'li.bullet[id="{node_id}"]'
    expect(_answers(tab, command)).to_have_count(1)
    expect(tab.locator(f"{command} > .run-status .run-cancel")).to_be_visible()
    script.release.set()
    expect(_answers(tab, command)).to_have_count(2)
    expect(tab.locator(f"{command} > .run-status")).to_contain_text("Answered.")


def test_a_failed_run_says_why_under_its_question(
    tab: Page, scripted: LiveServer, script: Script
) -> None:
    page_id, (cited,) = _page(scripted, "Failing", "Something to cite")
    script.bullets = [AnswerBullet("Written before it failed.", [f"node:{cited}"])]
    script.fail = "The chat model refused the key. Set OPENAI_API_KEY to a valid key."
    script.release.set()
    tab.goto(f"/p/{page_id}")
    _palette(tab)
    tab.keyboard.type("what fails here?")
    tab.keyboard.press("Shift+Enter")
    command = _command(tab, "/rag what fails here?")
    status = tab.locator(f"{command} > .run-status")
    expect(status.locator(".run-error")).to_have_text(
        "The answer failed: The chat model refused the key. Set OPENAI_API_KEY to a valid key."
    )
    expect(status.locator(".run-cancel")).to_have_count(0)
    expect(_answers(tab, command)).to_have_count(2)
    expect(_answers(tab, command).nth(1)).to_have_value(
        "The answer stopped: The chat model refused the key. Set OPENAI_API_KEY to a valid key."
    )


def test_a_question_the_server_refuses_says_why_and_keeps_the_bullet(
    tab: Page, scripted: LiveServer
) -> None:
    page_id, _ = _page(scripted, "Too long", "First bullet")
    tab.goto(f"/p/{page_id}")
    tab.locator("textarea.bullet-text").first.click()
    tab.keyboard.press("End")
    tab.keyboard.press("Enter")
    question = "why " + "x" * 2_000
    tab.keyboard.insert_text(f"/rag {question}")
    tab.keyboard.press("Enter")
    command = _command(tab, f"/rag {question}")
    expect(tab.locator(f"{command} > .run-status .run-error")).to_contain_text(
        "Not asked: The question is 2,004 characters; the limit is 2,000. Shorten it."
    )
    expect(tab.locator(".save-state")).to_have_text("Saved")
    with scripted.api() as api:
        texts = [n["text"] for n in api.get(f"/api/pages/{page_id}").json()["nodes"]]
    assert texts == ["First bullet", f"/rag {question}", ""]
