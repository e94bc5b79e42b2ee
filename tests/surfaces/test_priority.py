"""A niced process's Postgres backends claim the cores as it does (priority.lend_niceness):
the background process's statements wait for a person's searches as its Python does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from subspace.config import Settings
from subspace.context import Context
from subspace.database import IMPORT_NICENESS, Database
from subspace.db.pool import Conn, open_pool
from subspace.models import Actor
from tests.conftest import make_client

NICED = textwrap.dedent(
    """
    import json, os, sys
    import psycopg
    os.nice(7)
    from subspace.db.pool import open_pool
    from subspace.priority import lend_niceness
    pool = open_pool(sys.argv[1], max_size=1)
    plain = psycopg.connect(sys.argv[1])  # opened outside a pool: left as it is
    other = plain.execute("select pg_backend_pid()").fetchone()[0]
    with pool.connection() as conn:
        seen = {
            "pooled": conn.execute("select pg_backend_pid() as pid").fetchone()["pid"],
            "plain": other,
            # a pid that is no backend of the server named, and a server of another folder
            "not_a_backend": lend_niceness(os.getpid(), sys.argv[2]),
            "other_folder": lend_niceness(other, "/"),
        }
        print(json.dumps(seen), flush=True)
        sys.stdin.readline()  # the backends live until the test has looked at them
    pool.close()
    """
)


def test_a_niced_process_opens_backends_niced_as_it_is(database: Database) -> None:
    with database.pool.connection() as conn:
        folder = conn.execute("select current_setting('data_directory') as d").fetchone()["d"]  # type: ignore[index]
    child = subprocess.Popen(
        [sys.executable, "-c", NICED, database.dsn, folder],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdin is not None
        seen = json.loads(child.stdout.readline())
        pooled, plain = seen["pooled"], seen["plain"]
        assert os.getpriority(os.PRIO_PROCESS, pooled) == 7
        if os.getsid(pooled) == pooled:  # its own session: the session's claim is lowered too
            assert Path(f"/proc/{pooled}/autogroup").read_text().split()[-1] == "7"
        assert seen["not_a_backend"] is False and seen["other_folder"] is False
        assert os.getpriority(os.PRIO_PROCESS, plain) == 0
        child.stdin.write("\n")
        child.stdin.flush()
    finally:
        assert child.wait(timeout=30) == 0


def test_a_process_at_full_claim_leaves_its_backends_as_they_are(database: Database) -> None:
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0
    with database.pool.connection() as conn:
        pid = conn.execute("select pg_backend_pid() as pid").fetchone()["pid"]  # type: ignore[index]
    assert os.getpriority(os.PRIO_PROCESS, pid) == 0


@pytest.fixture
def with_imports(database: Database) -> Iterator[Database]:
    """The test database with a pool for uploads, niced as a web process's is."""
    imports = open_pool(database.dsn, max_size=2, niceness=IMPORT_NICENESS)
    yield replace(database, imports=imports)
    imports.close()


def backend_niceness(conn: Conn) -> int:
    pid = conn.execute("select pg_backend_pid() as pid").fetchone()["pid"]  # type: ignore[index]
    return os.getpriority(os.PRIO_PROCESS, pid)


def test_an_upload_writes_through_niced_backends_and_a_search_does_not(
    with_imports: Database, settings: Settings, actor: Actor
) -> None:
    cx = with_imports.context(actor, settings)
    with cx.importing().transaction() as conn:
        assert backend_niceness(conn) == IMPORT_NICENESS
    with cx.transaction() as conn:
        assert backend_niceness(conn) == 0

    client = make_client(with_imports, settings, actor)
    assert with_imports.imports is not None
    with_imports.imports.pop_stats()
    message = b"Message-ID: <m1@x>\r\nFrom: a@x\r\nSubject: Pier\r\n\r\nThe pier is closed.\r\n"
    answer = client.post("/api/mail/import", files={"file": ("m.eml", message, "message/rfc822")})
    assert answer.status_code == 200, answer.text
    answer = client.post("/api/files", files={"file": ("n.txt", b"harbour notes", "text/plain")})
    assert answer.status_code == 201, answer.text
    assert with_imports.imports.pop_stats().get("requests_num", 0) >= 2
    # without an imports pool (the command line, the tests' apps) an upload writes as before
    assert Context(with_imports.pool, actor, settings).importing().db is with_imports.pool
