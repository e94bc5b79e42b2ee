"""Test databases: clones of one migrated template, made ahead and dropped behind the tests
by a background thread, so a test waits for neither."""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import tempfile
import threading
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

READY = 2  # clones kept made ahead: one for the next test, one being made
SERVER_PREFIX = "subspace-test-pg-"
ABANDONED_AFTER_S = 3600  # a folder with no server this long was left by a run killed outright


def server_folder() -> Path:
    """A new folder for a test session's embedded server, in memory where the system has a
    tmpfs: creating a database checkpoints, which costs ~300 ms a test on this disk even
    without fsync, ~15 ms in memory.

    Outside pytest's temporary folders, which a concurrent run prunes (deleting a running
    server's data). Folders that runs killed outright left behind are removed first.
    """
    memory = Path("/dev/shm")
    parent = memory if memory.is_dir() and os.access(memory, os.W_OK) else None
    _remove_abandoned(Path(parent or tempfile.gettempdir()))
    return Path(tempfile.mkdtemp(prefix=SERVER_PREFIX, dir=parent))


def _remove_abandoned(parent: Path) -> None:
    for folder in parent.glob(f"{SERVER_PREFIX}*"):
        try:
            # initdb's standalone backend writes its pid negated: it is running too.
            pid = abs(int((folder / "data" / "postmaster.pid").read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pid = None
        try:
            young = time.time() - folder.stat().st_mtime < ABANDONED_AFTER_S
        except OSError:
            continue  # removed meanwhile
        running = pid is not None and Path(f"/proc/{pid}").exists()
        if not (running or young):
            shutil.rmtree(folder, ignore_errors=True)


def with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)  # type: ignore[arg-type]


class Clones:
    """Hands out fresh databases cloned from `template` on the server at `server_dsn`.

    `take()` returns the name of a database no test has used; `give_back(name)` drops it in
    the background. `close()` waits for the drops and drops the clones never taken. Names
    carry the process id, so several test processes can share one server.
    """

    def __init__(self, server_dsn: str, template: str) -> None:
        self._server_dsn = server_dsn
        self._template = template
        self._names = (f"subspace_test_{os.getpid()}_{n}" for n in itertools.count())
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        # Work for the thread: None to make one clone, a name to drop, STOP to end.
        self._work: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="test-clones", daemon=True)
        self._thread.start()
        for _ in range(READY):
            self._work.put(None)

    def take(self) -> str:
        self._work.put(None)  # replace the one taken
        made = self._ready.get(timeout=60)
        if isinstance(made, BaseException):
            raise made
        return made

    def give_back(self, name: str) -> None:
        self._work.put(name)

    def close(self) -> None:
        self._work.put(_STOP)
        self._thread.join(timeout=60)
        with psycopg.connect(self._server_dsn, autocommit=True) as conn:
            while not self._ready.empty():
                made = self._ready.get()
                if isinstance(made, str):
                    conn.execute(f"drop database if exists {made} with (force)")

    def _serve(self) -> None:
        with psycopg.connect(self._server_dsn, autocommit=True) as conn:
            while (item := self._work.get()) != _STOP:
                try:
                    if item is None:
                        name = next(self._names)
                        conn.execute(
                            f"create database {name} template {self._template} strategy file_copy"
                        )
                        self._ready.put(name)
                    else:
                        conn.execute(f"drop database if exists {item} with (force)")
                except psycopg.Error as exc:
                    if item is None:  # handed to the test that takes it, which fails with it
                        self._ready.put(exc)
                    # A failed drop leaves its database behind; an embedded server goes with it.


_STOP = "\0stop"
