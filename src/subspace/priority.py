"""How much of the cores each process of the server claims beside the others.

Linux with autogroup scheduling (the default of most distributions) shares the cores first
between sessions, then between the processes of each session, and `nice` counts only inside
a session. Postgres makes each backend a session of its own, while every process of the
server stayed in the session of whoever started it, with its load generators or shell: so
under load all the web processes together had one backend's share, and a niced parser child
took as much as a web process from anything outside that session. Each process of the server
is therefore a session of its own, and work that can wait lowers its session's claim too.

Work that can wait also runs in the idle class (SCHED_IDLE). Niceness alone sets a share
over time: a person's request woken on a core busy with niced work may wait for that work's
turn to end, at each of its wakeups (its web thread, its backend, each round trip). A waking
task of the normal class takes the core from an idle-class one at once (docs/benchmarks.md,
"Two tenants: a flood's Python yields, and work that can wait is idle-class"). The share does
not change where the kernel shares the cores between sessions: an idle-class process leads
a session of its own, which keeps the claim its niceness gives it, so indexing still moves
under load. Where it does not (autogroups off, or a cgroup that weighs the cores itself, as
in most containers), an idle-class task would get about 0.3% of a busy core against about
10% at niceness 10, so there work that can wait is only niced (`sessions_share_cores`).
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
    its session beside the others when it leads one; and run in the idle class where sessions
    share the cores (neither needs a privilege). Linux sets both per thread: every thread
    running now is set, and those started from now on take them from theirs."""
    now = os.nice(niceness)
    idle = sessions_share_cores()
    for thread in _threads():
        with suppress(OSError):  # one that has ended since
            os.setpriority(os.PRIO_PROCESS, thread, now)
        if idle:
            _idle_class(thread)
    if os.getsid(0) == os.getpid():
        with suppress(OSError):  # a kernel without autogroups
            AUTOGROUP.write_text(f"{niceness}\n")


def lend_niceness(pid: int, data_directory: str, niceness: int = 0) -> bool:
    """Have the Postgres backend `pid` claim the cores less by `niceness`, or as this process
    does when it is niced more, and run in the idle class where sessions share the cores: the
    background process's and the uploads' statements wait for a person's searches as their
    Python does. Only a backend working in `data_directory` (the caller's own server's
    folder, checked by the caller) on this machine is touched; one niced more already keeps
    its niceness. True when it was niced."""
    niceness = max(niceness, os.getpriority(os.PRIO_PROCESS, 0))
    if niceness <= 0:
        return False
    proc = Path(f"/proc/{pid}")
    try:
        if os.path.realpath(proc / "cwd") != os.path.realpath(data_directory):
            return False
        niced = os.getpriority(os.PRIO_PROCESS, pid) < niceness
        if niced:
            os.setpriority(os.PRIO_PROCESS, pid, niceness)
        if sessions_share_cores():
            _idle_class(pid)
        leads_a_session = os.getsid(pid) == pid  # each backend does
    except OSError:  # not this user's, or gone
        return False
    if niced and leads_a_session:
        with suppress(OSError):  # a kernel without autogroups
            (proc / "autogroup").write_text(f"{niceness}\n")
    return niced


def sessions_share_cores() -> bool:
    """Whether the kernel shares the cores between sessions for this process: autogroups are
    on, and its cgroup does not weigh the cores itself (`weighs_cores_itself`)."""
    try:
        if Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "1":
            return False
        cgroups = Path("/proc/self/cgroup").read_text()
    except OSError:
        return False
    return not weighs_cores_itself(cgroups, Path("/sys/fs/cgroup"))


def weighs_cores_itself(cgroups: str, mount: Path) -> bool:
    """Whether the cgroup of a process (`cgroups`, as /proc/<pid>/cgroup lists them; the
    unified hierarchy mounted at `mount`) shares the cores among its tasks itself, bypassing
    autogroups: in cgroup v1, one other than the cpu controller's root; in v2, one with a
    `cpu.weight` (the root has none), as a container's or a systemd slice's with the cpu
    controller has. Unknown counts as yes."""
    unified = None
    for line in cgroups.splitlines():
        _, controllers, path = line.split(":", 2)
        if not controllers:
            unified = path
        elif "cpu" in controllers.split(","):
            return path != "/"
    if unified is None:
        return True
    return (mount / unified.lstrip("/") / "cpu.weight").exists()


def _idle_class(pid: int) -> None:
    """Run thread `pid` (0: the calling one) in the idle class, where the kernel has one."""
    with suppress(AttributeError, OSError):  # not Linux; or a kernel without it
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))


def _threads() -> list[int]:
    """This process's threads (0, the calling one, where /proc does not list them)."""
    try:
        return [int(thread) for thread in os.listdir("/proc/self/task")]
    except FileNotFoundError:
        return [0]
