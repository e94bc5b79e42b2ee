"""The processes of `subspace serve`: a supervisor, N web processes behind its one port, and
one background process.

One interpreter cannot use more than one core for Python, so the supervisor binds the port
and starts `python -m subspace.processes web` N times on it (the kernel hands each new
connection to one of them) and `python -m subspace.processes background` once. It holds the
embedded Postgres, restarts a process that dies, and on Ctrl-C or SIGTERM stops them all
before it stops Postgres. The children reach Postgres as any client does, by the DSN the
supervisor gives them, and die with it (PR_SET_PDEATHSIG) if it is killed outright.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from subspace.config import Settings, child_environment
from subspace.priority import yield_cores

log = logging.getLogger(__name__)

WEB, BACKGROUND = "web", "background"
WATCH_S = 0.2  # how often the supervisor looks at its children
RESTART_DELAYS_S = (0.5, 1.0, 2.0, 5.0, 10.0)  # after the 1st, 2nd... death in a row
STEADY_S = 30.0  # a process that ran this long died once, not in a loop: its count restarts
# A stop waits this long for its children: uvicorn's graceful stop (server.GRACEFUL_STOP_S),
# and the background work's loops, each given server.JOIN_S.
STOP_WAIT_S = 25.0
# How much less of the cores the background process claims than a web process: extraction,
# embeddings and answer runs can wait a moment; a person at the palette cannot.
BACKGROUND_NICENESS = 10
_PR_SET_PDEATHSIG = 1


def worker_count(settings: Settings) -> int:
    """SUBSPACE_WORKERS, or one per core when it is 0."""
    return settings.workers or os.cpu_count() or 1


@dataclass
class Child:
    """One process the supervisor keeps running."""

    role: str
    number: int
    args: list[str]
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    deaths: int = 0  # in a row, each within STEADY_S of its start
    due: float = 0.0  # when a dead one is started again

    @property
    def name(self) -> str:
        return f"{self.role} process {self.number}" if self.role == WEB else "background process"


@dataclass
class Supervisor:
    """Starts the children, restarts the dead, stops them all. Not thread-safe: one thread
    runs it."""

    dsn: str
    workers: int
    listener: socket.socket
    metrics_dir: Path
    children: list[Child] = field(default_factory=list)

    def __post_init__(self) -> None:
        fd = str(self.listener.fileno())
        metrics = ["--metrics-dir", str(self.metrics_dir)]
        self.children = [
            Child(WEB, n, [WEB, "--fd", fd, *metrics]) for n in range(1, self.workers + 1)
        ]
        self.children.append(Child(BACKGROUND, 1, [BACKGROUND]))

    def start(self, child: Child) -> None:
        environment = child_environment(
            SUBSPACE_DATABASE_URL=self.dsn,  # the supervisor's Postgres, embedded or not
            SUBSPACE_WORKERS=str(self.workers),  # each process knows how many share the work
            PGAPPNAME=f"subspace {child.name}",  # Postgres's own views name who holds what
        )
        command = [sys.executable, "-m", "subspace.processes", *child.args]
        child.process = subprocess.Popen(
            [*command, "--supervisor", str(os.getpid())],
            env=environment,
            pass_fds=(self.listener.fileno(),) if child.role == WEB else (),
            start_new_session=True,  # scheduled beside Postgres's backends (priority.py)
        )
        child.started = time.monotonic()

    def watch(self) -> None:
        """Start every child, then restart the ones that die, until interrupted."""
        for child in self.children:
            self.start(child)
        while True:
            time.sleep(WATCH_S)
            now = time.monotonic()
            for child in self.children:
                process = child.process
                if process is not None and process.poll() is not None:
                    ran = now - child.started
                    child.deaths = 1 if ran >= STEADY_S else child.deaths + 1
                    delay = RESTART_DELAYS_S[min(child.deaths, len(RESTART_DELAYS_S)) - 1]
                    log.error(
                        "the %s (pid %d) exited with %s after %.1f s; starting it again in "
                        "%.1f s",
                        child.name, process.pid, process.returncode, ran, delay,
                    )  # fmt: skip
                    child.process, child.due = None, now + delay
                if child.process is None and now >= child.due:
                    self.start(child)

    def stop(self) -> None:
        """SIGTERM to every child, a wait for them, SIGKILL for the ones still running. Safe
        to call twice."""
        running = [c.process for c in self.children if c.process and c.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("process %d did not stop in %.0f s; killing it", process.pid,
                            STOP_WAIT_S)  # fmt: skip
                process.kill()
                process.wait()


def serve_processes(settings: Settings, dsn: str) -> None:
    """Serve on SUBSPACE_HOST:SUBSPACE_PORT with `worker_count()` web processes and one
    background process until KeyboardInterrupt (Ctrl-C, or SIGTERM under
    server.stop_on_sigterm), then stop them all."""
    from subspace.server import raise_open_file_limit

    raise_open_file_limit()  # inherited by the children
    family = socket.getaddrinfo(settings.host, settings.port, type=socket.SOCK_STREAM)[0][0]
    listener = socket.create_server((settings.host, settings.port), family=family, backlog=2048)
    listener.set_inheritable(True)
    metrics_dir = settings.home / "metrics" / str(os.getpid())
    shutil.rmtree(metrics_dir, ignore_errors=True)
    metrics_dir.mkdir(parents=True)
    supervisor = Supervisor(dsn, worker_count(settings), listener, metrics_dir)
    try:
        supervisor.watch()
    finally:
        supervisor.stop()
        listener.close()
        shutil.rmtree(metrics_dir, ignore_errors=True)


def _die_with_supervisor(supervisor: int) -> None:
    """Have the kernel SIGTERM this process when the supervisor dies (Linux); elsewhere the
    children outlive a supervisor killed outright."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != supervisor:  # it died before the call
        sys.exit(0)


def _web(fd: int, metrics_dir: Path) -> None:
    from subspace.api.app import create_app
    from subspace.database import open_database
    from subspace.server import serve_app, stop_on_sigterm

    settings = Settings.from_env()
    listener = socket.socket(fileno=fd)
    with stop_on_sigterm():
        try:
            db = open_database(
                settings, pool_size=settings.db_pool_size, replicas=True, yielding=True
            )
            # The web processes of this home count a workspace's searches and connections
            # together: the cores they share are the host's.
            shares, processes = settings.home / "shares", worker_count(settings)
            db.search_runtime.searches.count_over_host(shares / "searches", processes)
            db.connection_shares.count_over_host(shares / "connections", processes)
            try:
                app = create_app(settings, db, background=False)
                app.state.metrics_dir = metrics_dir
                tune_collector()
                serve_app(app, settings, sockets=[listener])
            finally:
                db.close()
        except KeyboardInterrupt:
            pass


# A search allocates tens of thousands of short-lived objects (rows, hits, UUIDs), and at
# Python's default threshold (700) the cyclic collector ran several times per search, walking
# every object the app holds: 5 % of a search's time under py-spy. Objects alive once the app
# is built are frozen out of its walks, and the youngest generation is collected ~30x less
# often; a web process's CPU per search fell from 10.7 to 9.0 ms (docs/benchmarks.md).
YOUNG_GENERATION = 20_000


def tune_collector() -> None:
    """Freeze what the process holds now and make the cyclic collector run less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION, 20, 100)


def _background() -> None:
    from subspace.background import run_elected
    from subspace.database import open_database
    from subspace.providers.registry import create_provider

    settings = Settings.from_env()
    yield_cores(BACKGROUND_NICENESS)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    db = open_database(settings, pool_size=1)
    try:
        run_elected(db, settings, create_provider(settings), stop)
    finally:
        db.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m subspace.processes")
    roles = parser.add_subparsers(dest="role", required=True)
    web = roles.add_parser(WEB, help="serve requests on an inherited listening socket")
    web.add_argument("--fd", type=int, required=True)
    web.add_argument("--metrics-dir", type=Path, required=True)
    background = roles.add_parser(BACKGROUND, help="run the background work while elected")
    for role in (web, background):
        role.add_argument("--supervisor", type=int, required=True, help="its process id")
    args = parser.parse_args(argv)
    _die_with_supervisor(args.supervisor)
    from subspace.logs import configure_logging

    settings = Settings.from_env()
    configure_logging(settings.log_level, settings.log_format)
    if args.role == WEB:
        _web(args.fd, args.metrics_dir)
    else:
        _background()


if __name__ == "__main__":
    main()
