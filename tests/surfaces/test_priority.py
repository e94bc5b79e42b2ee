"""A niced process's Postgres backends claim the cores as it does (priority.lend_niceness):
the background process's statements wait for a person's searches as its Python does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from subspace.database import Database

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
