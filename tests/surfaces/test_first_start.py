"""First start: the demo is seeded once, and each start prints a sign-in link of its own."""

from __future__ import annotations

from dataclasses import replace

from subspace.config import Settings
from subspace.database import Database
from subspace.db import queries
from subspace.first_start import initialize_workspace, signin_link, signin_url
from subspace.ingest.worker import extract_pending
from subspace.keys import list_keys
from subspace.providers.fake import FakeProvider
from subspace.search.request import SearchRequest
from subspace.search.service import search
from subspace.sessions import start_session


def test_demo_is_seeded_once(database: Database, settings: Settings) -> None:
    assert initialize_workspace(database, settings, demo=True) is True
    assert initialize_workspace(database, settings, demo=True) is False
    cx = database.default_context(settings)
    with cx.transaction() as conn:
        pages = queries.list_pages(conn, cx.actor.workspace_id)
        titles = {p.title for p in pages}
        incident = next(p for p in pages if p.title.startswith("Incident"))
        tree = queries.get_page_tree(conn, cx.actor.workspace_id, incident.id)
    assert {"Welcome to Subspace", "Sourdough schedule"} <= titles
    assert len(pages) == 4
    root_cause = next(n for n in tree.nodes if n.text == "Root cause")
    assert len(root_cause.children) == 2


def test_demo_files_and_mail_are_searchable_text(database: Database, settings: Settings) -> None:
    initialize_workspace(database, settings, demo=True)
    assert extract_pending(database, settings) == 3  # the PDF, the DOCX and one attachment
    cx = database.default_context(settings)
    with cx.transaction() as conn:
        texts = {
            row["name"]: row["text"]
            for row in conn.execute(
                "select f.name, t.text from kb.files f join search.file_text t "
                "on t.workspace_id = f.workspace_id and t.file_id = f.id"
            ).fetchall()
        }
        subjects = {m.subject for m in queries.list_mail(conn, cx.actor.workspace_id)}
        flaky = next(
            m for m in queries.list_mail(conn, cx.actor.workspace_id) if "flaky" in m.subject
        )
    assert "PRN-4F-LIS" in texts["office-field-guide.pdf"]
    assert "Staging cluster | Platform team" in texts["onboarding-checklist.docx"]
    assert "Total due: 1,240.00 EUR" in texts["invoice-INV-20931.txt"]
    assert subjects == {
        "Quarterly planning: dates",
        "Re: flaky integration tests",
        "Vendor invoice INV-20931",
    }
    assert "race on the shared fixture" in flaky.body_text


def test_no_demo_still_marks_the_workspace_initialized(
    database: Database, settings: Settings
) -> None:
    assert initialize_workspace(database, settings, demo=False) is True
    assert initialize_workspace(database, settings, demo=True) is False
    cx = database.default_context(settings)
    with cx.transaction() as conn:
        assert queries.list_pages(conn, cx.actor.workspace_id) == []


def test_each_start_prints_a_link_with_a_new_code_that_signs_in_once(
    database: Database, settings: Settings
) -> None:
    first, second = signin_link(database, settings), signin_link(database, settings)
    assert first != second
    assert first.startswith("http://127.0.0.1:8765/signin?code=ssc_")
    assert not (settings.home / "signin-key").exists()  # no key is kept for a link any more
    with database.pool.connection() as conn:
        session, _ = start_session(conn, first.split("code=")[1], days=1)
        assert session.key_id is None
        assert list_keys(conn, database.default_context(settings).actor.workspace_id) == []
    listening_everywhere = replace(settings, host="::", port=9000)
    assert signin_url(listening_everywhere, "c") == "http://127.0.0.1:9000/signin?code=c"
    assert signin_url(replace(settings, host="::1"), "c") == "http://[::1]:8765/signin?code=c"


def test_the_demo_holds_memory_items_that_search_finds(
    database: Database, settings: Settings
) -> None:
    initialize_workspace(database, settings, demo=True)
    cx = database.default_context(settings)
    response = search(
        cx,
        database.searcher(FakeProvider()),
        SearchRequest(query="window seat train", mode="lexical", kinds=["memory"]),
    )
    assert [row.type for row in response.rows] == ["mem"]
    assert response.rows[0].title == "Welcome to Subspace"
