"""First start: the demo is seeded once, and the sign-in key survives restarts."""

from __future__ import annotations

from subspace.config import Settings
from subspace.db import queries
from subspace.first_start import initialize_workspace, signin_token, signin_url
from subspace.ingest.worker import extract_pending
from subspace.keys import authenticate, list_keys, revoke_key
from subspace.providers.fake import FakeProvider
from subspace.runtime import Database
from subspace.search.request import SearchRequest
from subspace.search.service import search


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


def test_signin_token_is_reused_and_replaced_when_revoked(
    database: Database, settings: Settings
) -> None:
    first = signin_token(database, settings)
    assert signin_token(database, settings) == first
    assert (settings.home / "signin-key").stat().st_mode & 0o077 == 0
    with database.pool.connection() as conn:
        ws = authenticate(conn, first).workspace_id
        for key in list_keys(conn, ws):
            revoke_key(conn, ws, key.id)
    second = signin_token(database, settings)
    assert second != first
    with database.pool.connection() as conn:
        assert authenticate(conn, second).workspace_id == ws
    assert signin_url(settings, second) == f"http://127.0.0.1:8765/?token={second}"


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
