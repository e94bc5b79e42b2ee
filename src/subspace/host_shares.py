"""A workspace's searches in flight, and its database connections in use, counted over every
web process of this host.

Each web process queues its own requests fairly (shares.py), but the cores belong to the
host: with two web processes, a workspace holding its share in each held twice its share of
the cores, and a flood of long queries kept both busy while another workspace waited
(bench/tenants.py). Here a search in flight (or a request's connection) also holds one of its
workspace's slot files locked, and beside another workspace using this host a workspace may
lock only its shared share of them.

Slots are `flock`s on files under one folder per thing counted, named `<workspace>.<n>`: the
kernel gives a lock back when its process dies, even by kill -9, so no count can leak. A slot
file's mtime is the last time it was taken or given back: another workspace's file touched
within ACTIVE_S says that workspace is using the host too.

A process that finds a workspace flooding it (floods.py) touches `<workspace>.flood` there,
and every process takes it as flooding while that mark is fresh (MARK_FRESH_S). Judged by each
process's own queue alone, up to 48 % of a flood's requests were not found a flood's: a
process holding few of its connections sees its queue empty now and then
(docs/benchmarks.md).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from subspace.errors import TooMany

if TYPE_CHECKING:
    from subspace.cancel import Cancel
    from subspace.floods import FloodWatch

log = logging.getLogger(__name__)

# How long a workspace counts as using the server after its last slot was given back, here and
# in each process (shares.py): its next request comes soon, and should find the others held to
# their shared share.
ACTIVE_S = 1.0
# What a workspace may hold over the host while another workspace uses it too: half the
# cores. A flood of long queries held two searches in each of two web processes, so both
# cores, and a neighbour's p95 was 6.1x its own alone; at one for the host, 1.9x
# (bench/tenants.py, docs/benchmarks.md).
SHARED_PER_HOST = max(1, (os.cpu_count() or 2) // 2)
POLL_S = 0.005  # how often a search over its share looks for a slot given back
SCAN_S = 0.1  # how long one look at which workspaces search here is trusted
FLOOD_MARK = "flood"  # the suffix of a workspace's flood mark, where slots have numbers
# How long a flood mark holds: a few of the touches the finding process makes while the flood
# lasts (one a SCAN_S), and a flood's nicing ends soon after its queue does.
MARK_FRESH_S = 5 * SCAN_S


class HostSlots:
    """Slots of one thing (searches in flight, connections in use) per workspace, shared by
    the processes that use the same `folder`. Thread-safe."""

    def __init__(self, folder: Path, what: str, *, per_key: int, shared_per_key: int) -> None:
        """A key holds at most `per_key` slots while it is alone on the host, and at most
        `shared_per_key` while another key holds one or lately gave one back."""
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.what = what
        self.per_key = per_key
        self.shared_per_key = shared_per_key
        self._lock = threading.Lock()
        self._scanned_at = -SCAN_S
        self._last_use: dict[str, float] = {}  # key -> the latest mtime of its slot files
        self._marked: dict[str, float] = {}  # key -> its flood mark's mtime
        self._marked_here: dict[str, float] = {}  # key -> when this process last marked it
        self._failing: set[str] = set()  # what the folder fails at ("read"...), said once each

    @contextmanager
    def hold(
        self,
        key: Hashable,
        deadline: float | None,
        cancel: Cancel | None = None,
        watch: FloodWatch | None = None,
    ) -> Iterator[None]:
        """Hold one of `key`'s slots in the block; wait until `deadline` (time.monotonic(),
        None: for ever) for one, then raise TooMany. A waiter whose `cancel` is set stops
        waiting (CallerGone); one that waits is counted in `watch` until it has its slot."""
        name = str(key)
        try:
            with watch.asking(key) if watch else nullcontext(lambda: None) as waits:
                while (fd := self._take(name, self._limit(name))) is None:
                    waits()
                    if cancel is not None:
                        cancel.check()
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TooMany(
                            f"This workspace already has {self.shared_per_key} {self.what}, "
                            "its share while other workspaces use the server too. Retry in 1 s."
                        )
                    time.sleep(POLL_S)
        except OSError as exc:
            # A folder that cannot hold slot files (a file in its way, a full disk, no
            # permission) leaves each process to its own shares: nothing is refused for it.
            self._failed("locked", exc)
            yield
            return
        self._failing.discard("locked")
        try:
            yield
        finally:
            self._give_back(name, fd)

    def others_active(self, key: Hashable) -> bool:
        """Whether a key other than `key` held a slot within ACTIVE_S, as last looked."""
        name = str(key)
        now = time.time()
        with self._lock:
            self._look()
            return any(k != name and now - at < ACTIVE_S for k, at in self._last_use.items())

    def mark_flooding(self, key: Hashable) -> None:
        """Tell every process that `key` floods this one: its mark, touched at most once a
        SCAN_S. Safe to call on every request."""
        name = str(key)
        with self._lock:
            if time.monotonic() - self._marked_here.get(name, -SCAN_S) < SCAN_S:
                return
            self._marked_here[name] = time.monotonic()
        try:
            fd = os.open(self.folder / f"{name}.{FLOOD_MARK}", os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.utime(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # as for slots: this process's own judgement still holds
            self._failed("marked", exc)
        else:
            self._failing.discard("marked")

    def marked_flooding(self, key: Hashable) -> bool:
        """Whether a process of the host, this one included, marked `key` flooding within
        MARK_FRESH_S, as last looked."""
        name = str(key)
        with self._lock:
            self._look()
            marked_at = self._marked.get(name)
        return marked_at is not None and 0 <= time.time() - marked_at < MARK_FRESH_S

    def _limit(self, name: str) -> int:
        return self.shared_per_key if self.others_active(name) else self.per_key

    def _look(self) -> None:
        """The folder read again when the last look is older than SCAN_S; under `_lock`."""
        if time.monotonic() - self._scanned_at >= SCAN_S:
            self._last_use, self._marked = self._scan()
            self._scanned_at = time.monotonic()

    def _scan(self) -> tuple[dict[str, float], dict[str, float]]:
        """Each key's latest slot mtime, and each marked key's flood mark mtime; nothing
        from a folder that cannot be read (each process then judges on its own)."""
        used: dict[str, float] = {}
        marked: dict[str, float] = {}
        try:
            with os.scandir(self.folder) as entries:
                for entry in entries:
                    key, _, suffix = entry.name.rpartition(".")
                    found = marked if suffix == FLOOD_MARK else used
                    with suppress(FileNotFoundError):
                        found[key] = max(found.get(key, 0.0), entry.stat().st_mtime)
        except FileNotFoundError:  # made again by the next slot taken
            pass
        except OSError as exc:
            self._failed("read", exc)
            return {}, {}
        self._failing.discard("read")
        return used, marked

    def _failed(self, doing: str, exc: OSError) -> None:
        """A warning that the folder cannot be `doing` ("locked", "read", "marked"): once,
        until it serves again, as every request asks."""
        if doing not in self._failing:
            self._failing.add(doing)
            log.warning("%s: %s cannot be %s (%s); each process counts its own and judges "
                        "floods on its own", self.what, self.folder, doing, exc)  # fmt: skip

    def _take(self, name: str, limit: int) -> int | None:
        """An open slot file of `name` this call locked, or None when `limit` are held."""
        for n in range(limit):
            path = self.folder / f"{name}.{n}"
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            except FileNotFoundError:  # the folder was removed while the server ran
                self.folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._touch(name, fd)
            return fd
        return None

    def _give_back(self, name: str, fd: int) -> None:
        try:
            self._touch(name, fd)
        finally:
            os.close(fd)  # closing the only descriptor of the open file gives the lock back

    def _touch(self, name: str, fd: int) -> None:
        os.utime(fd)
        with self._lock:
            self._last_use[name] = time.time()
