"""kill -9 in the middle of a sync loses nothing and duplicates nothing: the next round
brings in exactly what the killed one had not, for a folder and for a mailbox."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.sources import model
from tests import imap_server
from tests.imap_server import Dovecot, message
from tests.sources.conftest import sync

pytestmark = pytest.mark.slow


def count(database: Database, sql: str) -> int:
    with database.pool.connection() as conn:
        row = conn.execute(sql).fetchone()
    return int(row["n"]) if row else 0


def sync_killed_midway(settings: Settings, database: Database, name: str, sql: str,
                       at: int) -> None:  # fmt: skip
    """`subspace sources sync NAME` in a process of its own, killed with SIGKILL once `sql`
    counts `at` rows."""
    env = {**os.environ, "SUBSPACE_HOME": str(settings.home), "PROVIDERS": "fake",
           "SUBSPACE_DATABASE_URL": settings.database_url,
           "SUBSPACE_SOURCES_KEY": settings.sources_key}  # fmt: skip
    command = [sys.executable, "-m", "subspace", "sources", "sync", name]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while count(database, sql) < at:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "the sync never got that far"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()


def test_a_folder_sync_killed_midway_is_finished_exactly_by_the_next(
    database: Database, keyed: Settings, keyed_cx: Context, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(400):
        lines = "\n".join(f"- entry {n}.{k}: the tide table for pier {k}" for k in range(5))
        (notes / f"log-{n:03d}.md").write_text(f"# Log {n}\n\n{lines}\n")
    source = model.add_source(keyed_cx, "notes", "folder", model.folder_config(str(notes)))
    pages = "select count(*) as n from kb.pages where source_path is not null"
    sync_killed_midway(keyed, database, "notes", pages, at=120)
    killed_at = count(database, pages)
    assert 120 <= killed_at < 400

    counts = sync(database, keyed, source)
    assert counts["added"] == 400 - killed_at  # what the killed round had done is not redone
    assert count(database, pages) == 400
    assert count(database, "select count(distinct source_path) as n from kb.pages") == 400
    # Every page whole: its five bullets, none twice.
    assert count(database, "select count(*) as n from kb.nodes") == 2000
    assert count(database, "select count(distinct (page_id, text)) as n from kb.nodes") == 2000
    assert count(database, "select count(*) as n from kb.source_items "
                           "where item_id is not null") == 400  # fmt: skip


def test_a_mailbox_sync_killed_midway_is_finished_exactly_by_the_next(
    database: Database, keyed: Settings, keyed_cx: Context, dovecot: Dovecot
) -> None:
    dovecot.deliver("INBOX", [message(n) for n in range(300)])
    config = model.imap_config("127.0.0.1", port=dovecot.port, tls="none",
                               user=imap_server.USER, folders=["INBOX"])  # fmt: skip
    source = model.add_source(keyed_cx, "mail", "imap", config, password=imap_server.PASSWORD)
    mails = "select count(*) as n from kb.mail"
    sync_killed_midway(keyed, database, "mail", mails, at=60)
    killed_at = count(database, mails)
    assert 60 <= killed_at < 300

    counts = sync(database, keyed, source)
    assert (counts["added"], counts["fetched"]) == (300 - killed_at, 300 - killed_at)
    assert count(database, mails) == 300
    assert count(database, "select count(*) as n from kb.source_items") == 300
