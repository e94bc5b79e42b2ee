"""How much of the cores each process of the server claims beside the others.

Linux with autogroup scheduling (the default of most distributions) shares the cores first
between sessions, then between the processes of each session, and `nice` counts only inside
a session. Postgres makes each backend a session of its own, while every process of the
server stayed in the session of whoever started it, with its load generators or shell: so
under load all the web processes together had one backend's share, and a niced parser child
took as much as a web process from anything outside that session. Each process of the server
is therefore a session of its own, and work that can wait lowers its session's claim too.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

# The autogroup of the session this process leads, where the kernel schedules by them.
AUTOGROUP = Path("/proc/self/autogroup")


def own_session() -> None:
    """Make this process a session of its own (so its own autogroup). A process that
    already leads one stays in it."""
    with suppress(PermissionError):
        os.setsid()


def yield_cores(niceness: int) -> None:
    """Claim less of the cores by `niceness`: this process beside those of its session, and
    its session beside the others when it leads one (raising a niceness needs no privilege).
    Linux keeps a niceness per thread: every thread running now is niced (numpy starts one
    when it is imported, which had stayed at full claim in the background process), and those
    started later take it from theirs."""
    now = os.nice(niceness)
    for thread in _threads():
        with suppress(OSError):  # one that has ended since
            os.setpriority(os.PRIO_PROCESS, thread, now)
    if os.getsid(0) == os.getpid():
        with suppress(OSError):  # a kernel without autogroups
            AUTOGROUP.write_text(f"{niceness}\n")


def lend_niceness(pid: int, data_directory: str, niceness: int = 0) -> bool:
    """Have the Postgres backend `pid` claim the cores less by `niceness`, or as this process
    does when it is niced more: the background process's and the uploads' statements wait
    for a person's searches as their Python does. Only a backend working in
    `data_directory` (the caller's own server's folder, checked by the caller) on this
    machine is touched; one niced more already is left as it is. True when it was niced."""
    niceness = max(niceness, os.getpriority(os.PRIO_PROCESS, 0))
    if niceness <= 0:
        return False
    proc = Path(f"/proc/{pid}")
    try:
        if os.path.realpath(proc / "cwd") != os.path.realpath(data_directory):
            return False
        if os.getpriority(os.PRIO_PROCESS, pid) >= niceness:
            return False
        os.setpriority(os.PRIO_PROCESS, pid, niceness)
        leads_a_session = os.getsid(pid) == pid  # each backend does
    except OSError:  # not this user's, or gone
        return False
    if leads_a_session:
        with suppress(OSError):  # a kernel without autogroups
            (proc / "autogroup").write_text(f"{niceness}\n")
    return True


def _threads() -> list[int]:
    """This process's threads (0, the calling one, where /proc does not list them)."""
    try:
        return [int(thread) for thread in os.listdir("/proc/self/task")]
    except FileNotFoundError:
        return [0]
