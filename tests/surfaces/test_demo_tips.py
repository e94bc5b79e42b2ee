"""The demo does what its welcome page says: each tip, read from the page as seeded and tried
as written on the demo workspace (searches as the palette runs them, commands through the CLI,
questions through the run engine the API uses, with the fake chat provider)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import pytest
from click.testing import CliRunner

from subspace.answers import runs
from subspace.cli import main
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.first_start import initialize_workspace
from subspace.ingest.worker import extract_pending
from subspace.models import TreeNode
from subspace.providers.fake import FakeProvider
from subspace.search.request import SearchRequest
from subspace.search.service import search
from tests.search_helpers import index

WELCOME = "Welcome to Subspace"
INCIDENT = "Incident review: checkout outage"
RECIPE = "Sourdough schedule"


@dataclass
class Demo:
    cx: Context
    database: Database
    settings: Settings
    tips: list[TreeNode]  # every bullet of the welcome page, in reading order

    def tip(self, pattern: str) -> re.Match[str]:
        """The match of `pattern` in the one tip it matches: a tip reworded so that the
        pattern no longer finds it fails here, not in an assertion further down."""
        found = [m for m in (re.search(pattern, n.text) for n in self.tips) if m is not None]
        assert len(found) == 1, f"{len(found)} tips match {pattern!r}"
        return found[0]

    def bullet(self, title: str, text: str) -> UUID:
        """The id of the bullet of page `title` that starts with `text`."""
        with self.cx.transaction() as conn:
            ws = self.cx.actor.workspace_id
            page = next(p for p in queries.list_pages(conn, ws) if p.title == title)
            nodes = list(_walk(queries.get_page_tree(conn, ws, page.id).nodes))
        return next(n.id for n in nodes if n.text.startswith(text))


def _walk(nodes: list[TreeNode]) -> Iterator[TreeNode]:
    for node in nodes:
        yield node
        yield from _walk(node.children)


@pytest.fixture
def demo(database: Database, settings: Settings) -> Demo:
    """The demo as `subspace serve` seeds it, its files extracted and everything embedded."""
    initialize_workspace(database, settings, demo=True)
    extract_pending(database, settings)
    cx = database.default_context(settings)
    index(database, cx)
    with cx.transaction() as conn:
        ws = cx.actor.workspace_id
        welcome = next(p for p in queries.list_pages(conn, ws) if p.title == WELCOME)
        tips = list(_walk(queries.get_page_tree(conn, ws, welcome.id).nodes))
    return Demo(cx, database, settings, tips)


@pytest.fixture
def cli(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("SUBSPACE_DATABASE_URL", demo.settings.database_url)
    monkeypatch.setenv("SUBSPACE_HOME", str(demo.settings.home))
    monkeypatch.setenv("PROVIDERS", "fake")
    return CliRunner()


def first_row(demo: Demo, query: str, kinds: list[str] | None = None) -> tuple[str, str, str]:
    """(type, title, passage) of the first row of a search as the palette runs it."""
    rows = search(
        demo.cx, demo.database.searcher(FakeProvider()), SearchRequest(query=query, kinds=kinds)
    ).rows
    assert rows, f"{query!r} found nothing"
    return rows[0].type, rows[0].title, rows[0].passage


# -- the search palette ----------------------------------------------------------------------


def test_the_palette_tip_finds_the_incident_page_first(demo: Demo) -> None:
    query = demo.tip(r"and type: (.+)$").group(1)
    assert query == "checkout outage"
    assert first_row(demo, query)[:2] == ("page", INCIDENT)


def test_each_exact_identifier_finds_the_bullet_that_holds_it_first(demo: Demo) -> None:
    tip = demo.tip(r"Exact identifiers work too: try (\S+) or (\S+)$")
    for identifier in tip.groups():
        kind, title, passage = first_row(demo, identifier)
        assert (kind, title) == ("node", INCIDENT), identifier
        assert identifier in passage


def test_the_kind_chip_keeps_one_kind_and_finds_the_bill(demo: Demo) -> None:
    tip = demo.tip(r"\(kind:(\w+) (\w+) finds the hosting bill\)")
    kind, query = tip.groups()
    rows = search(
        demo.cx, demo.database.searcher(FakeProvider()), SearchRequest(query=query, kinds=[kind])
    ).rows
    assert rows
    assert {row.type for row in rows} == {"mail"}
    assert rows[0].title == "Vendor invoice INV-20931"
    assert "hosting bill" in rows[0].passage


def test_the_typo_tip_is_corrected_and_finds_the_recipe(demo: Demo) -> None:
    word, a, b = demo.tip(r"Typos are forgiven: type (\w+) with its (\w) and (\w) swapped").groups()
    i, j = word.index(a), word.index(b)
    assert j == i + 1, "the tip swaps two neighbouring letters"
    typo = word[:i] + b + a + word[j + 1 :]
    assert typo == "hyrdation"
    # The typo is nowhere in the demo, so the search corrects it instead of finding it.
    assert not any(typo in tip.text for tip in demo.tips)
    response = search(demo.cx, demo.database.searcher(FakeProvider()), SearchRequest(query=typo))
    assert response.corrections == {typo: word}
    first = response.rows[0]
    assert (first.type, first.title) == ("node", RECIPE)
    assert word in first.passage


# -- the command line ------------------------------------------------------------------------


def test_the_search_command_tip_explains_each_legs_ranks(demo: Demo, cli: CliRunner) -> None:
    query = demo.tip(r'subspace search "([^"]+)", with --explain').group(1)
    result = cli.invoke(main, ["search", query, "--explain", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert INCIDENT in [row["title"] for row in rows]
    for row in rows:
        ranks = {leg: score["rank"] for leg, score in row["legs"].items()}
        assert ranks
        assert {t["leg"]: t["rank"] for t in row["explain"]["terms"]} == ranks


def test_the_grep_tip_finds_every_occurrence(demo: Demo, cli: CliRunner) -> None:
    word = demo.tip(r"subspace grep (\w+)$").group(1)
    result = cli.invoke(main, ["grep", word])
    assert result.exit_code == 0, result.output
    for bullet in ("Retries without jitter", "Add exponential backoff with full jitter"):
        assert f"node:{demo.bullet(INCIDENT, bullet)}" in result.stdout, bullet


def test_the_read_tip_reads_the_recipe(demo: Demo, cli: CliRunner) -> None:
    title = demo.tip(r'subspace read "([^"]+)"').group(1)
    result = cli.invoke(main, ["read", title])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"# {RECIPE} (page:")
    assert "Mix the dough in the morning at 75% hydration" in result.stdout


# -- asking ----------------------------------------------------------------------------------


def answer(demo: Demo, run: runs.Run) -> tuple[runs.Run, list[dict[str, Any]]]:
    """The run executed by the run engine the API uses (fake embeddings and chat provider)."""
    engine = runs.RunEngine(demo.database, demo.settings, FakeProvider())
    claimed = engine.claim(run.id)
    assert claimed is not None
    done = engine.execute(claimed)
    with demo.cx.transaction() as conn:
        return done, runs.answer_of(runs.list_steps(conn, demo.cx.actor.workspace_id, run.id))


def test_the_rag_tip_answers_from_the_memory_item(demo: Demo) -> None:
    """Enter at the end of the tip's "/rag …" bullet files it as the question (the web app
    asks with the bullet's id); the memory item on the welcome page answers it."""
    asking = next(tip for tip in demo.tips if tip.text.startswith("/rag "))
    question = asking.text.removeprefix("/rag ")
    memory = f"node:{demo.bullet(WELCOME, 'On-call handover is on Mondays at 10:00')}"
    run = runs.enqueue_run(demo.cx, question, "rag", node_id=asking.id)
    assert run.node_id == asking.id
    done, bullets = answer(demo, run)  # written under the tip, on the welcome page
    assert done.found is True
    assert [bullet["refs"] for bullet in bullets] == [[memory]]
    assert "Mondays at 10:00" in bullets[0]["text"]


CHECKOUT_CAUSES = (
    "A connection pool of 10 was exhausted when the payment provider slowed down",
    "Retries without jitter multiplied the load",
)


@pytest.mark.parametrize("strategy", runs.STRATEGY_NAMES)
@pytest.mark.parametrize(
    ("question", "facts"),
    [
        ("what caused the checkout outage?", CHECKOUT_CAUSES),
        ("how long was checkout down?", ("Impact: checkout returned HTTP 502 for 14 minutes",)),
    ],
)
def test_the_suggested_questions_are_answered_from_the_incident_page(
    demo: Demo, strategy: str, question: str, facts: tuple[str, ...]
) -> None:
    """The three ways to answer the welcome page names each answer the suggested question
    (and the next one a reader asks) with what the incident review says, and nothing else."""
    if question.startswith("what caused"):
        assert demo.tip(r'subspace ask "([^"]+)"').group(1) == question
    cited = [f"node:{demo.bullet(INCIDENT, fact)}" for fact in facts]
    done, bullets = answer(demo, runs.enqueue_run(demo.cx, question, strategy))
    assert done.found is True
    assert [bullet["refs"] for bullet in bullets] == [[ref] for ref in cited]
    assert [bullet["text"] for bullet in bullets] == [_sentence_of(demo, f) for f in facts]


def _sentence_of(demo: Demo, start: str) -> str:
    """The whole text of the incident bullet that starts with `start`."""
    with demo.cx.transaction() as conn:
        node = queries.get_node(conn, demo.cx.actor.workspace_id, demo.bullet(INCIDENT, start))
    return node.text


def test_the_ask_command_tip_answers_as_written(demo: Demo, cli: CliRunner) -> None:
    question = demo.tip(r'subspace ask "([^"]+)"').group(1)
    result = cli.invoke(main, ["ask", question, "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["found"] is True
    assert [bullet["text"] for bullet in printed["answer"]] == list(CHECKOUT_CAUSES)
    cited = {ref for bullet in printed["answer"] for ref in bullet["refs"]}
    assert cited == {f"node:{demo.bullet(INCIDENT, fact)}" for fact in CHECKOUT_CAUSES}


def test_a_question_the_demo_cannot_answer_gets_no_guess(demo: Demo) -> None:
    assert demo.tip(r'gets "I found nothing about …" and the closest hits, never a guess')
    question = "which tram goes to the zoo in Prague?"
    done, bullets = answer(demo, runs.enqueue_run(demo.cx, question, "rag"))
    assert done.found is False
    assert bullets[0]["text"] == f"I found nothing about {question.rstrip('?')}."
    assert all(bullet["text"].startswith("Closest: ") for bullet in bullets[1:])
