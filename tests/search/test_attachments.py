"""A mail's attachment found with its mail is one row, the mail's: a real delivery failure
("recipient reached disk quota") listed its delivery report, then the message itself."""

from __future__ import annotations

import shutil
from pathlib import Path

from subspace.context import Context
from subspace.database import Database
from subspace.db import queries
from subspace.ingest.importer import import_path
from subspace.ingest.worker import extract_pending
from tests.search_helpers import index, run

MAIL = Path(__file__).parents[1] / "relevance" / "real" / "workspace" / "mail"


def _import(tmp_path: Path, database: Database, cx: Context, *names: str) -> None:
    folder = tmp_path / "mail"
    folder.mkdir()
    for name in names:
        shutil.copy(MAIL / name, folder / name)
    with cx.transaction() as conn:
        kb = queries.default_knowledge_base(conn, cx.actor.workspace_id)
    import_path(cx, folder, kb_id=kb.id)
    extract_pending(database, cx.settings)
    index(database, cx)


def test_an_attachment_found_with_its_mail_is_the_mails_row(
    tmp_path: Path, database: Database, cx: Context
) -> None:
    _import(tmp_path, database, cx, "msg_16.eml", "msg_43.eml")
    for mode in ("lexical", "hybrid"):
        rows = run(database, cx, "recipient reached disk quota", mode=mode).rows
        assert (rows[0].type, rows[0].title) == (
            "mail",
            "Delivery Notification: Delivery has failed",
        )
        assert not [row for row in rows if row.type == "file" and row.mail_id == rows[0].id], mode


def test_an_attachment_found_without_its_mail_keeps_its_row(
    tmp_path: Path, database: Database, cx: Context
) -> None:
    _import(tmp_path, database, cx, "msg_16.eml")
    rows = run(database, cx, "Original-envelope-id", mode="lexical").rows
    assert [row.type for row in rows] == ["file"]  # the report's header, not the message's text
