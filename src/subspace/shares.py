"""Slots of something the server holds a fixed number of, shared fairly among workspaces.

A search in flight, a parser child, a database connection: each is held for a while and
given back. One workspace takes at most `per_key` of them; when several wait, the slot given
back goes to the waiter whose workspace holds the fewest (the earliest of those), so a
workspace flooding the server leaves the next free slot to the others. A caller that waits
past its deadline is told which bound it met: its own workspace's (429, TooMany) or the
server's (503, Busy).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from subspace.errors import Busy, TooMany
from subspace.floods import FloodWatch
from subspace.host_shares import ACTIVE_S, SHARED_PER_HOST, HostSlots

if TYPE_CHECKING:
    from subspace.cancel import Cancel


class Shares:
    def __init__(
        self, what: str, *, total: int | None, per_key: int, shared_per_key: int | None = None
    ) -> None:
        """`what` names one slot in messages ("searches in flight"); `total` None is no
        bound in all. A key holds at most `per_key` while it is alone, and at most
        `shared_per_key` (when given) while another key holds, waits for or lately gave
        back a slot: alone, a workspace has the whole machine; beside another, its half."""
        self.what = what
        # Set when the same key's slots are also counted over every process of the host:
        # taken after one of this process's, within the same wait.
        self.host: HostSlots | None = None
        self.total = total
        self.per_key = per_key
        self.shared_per_key = shared_per_key
        self._held: Counter[Hashable] = Counter()
        self._last_use: dict[Hashable, float] = {}
        self._waiting: dict[int, Hashable] = {}  # ticket -> key, in the order they came
        self._tickets = itertools.count()
        self._changed = threading.Condition()
        # Which keys have had a request waiting for a slot, here or over the host, lately
        # without a break: they flood the server (floods.py).
        self.watch = FloodWatch()
        self.floods = 0  # callers told their key floods (the server's /metrics)

    def count_over_host(self, folder: Path, processes: int) -> None:
        """Count each key's slots over the `processes` processes sharing `folder` as well
        as in this one: alone, a key may hold `per_key` in each; beside another, its share
        of the host's cores in all (host_shares.py)."""
        self.host = HostSlots(folder, self.what, per_key=self.per_key * processes,
                              shared_per_key=SHARED_PER_HOST)  # fmt: skip

    def flooding(self, key: Hashable) -> bool:
        """Whether `key` has asked for more than its share for a while without a break, as
        this process finds or any process of the host lately found (host_shares.py's marks),
        while another key uses the server too (alone, it has no one to yield to). Each yes is
        counted in `floods`."""
        host = self.host
        if self.watch.flooding(key):
            if host is not None:
                host.mark_flooding(key)
        elif host is None or not host.marked_flooding(key):
            return False
        with self._changed:
            others = self._others_active(key)
        if others or (host is not None and host.others_active(key)):
            with self._changed:
                self.floods += 1
            return True
        return False

    def held(self, key: Hashable | None = None) -> int:
        """How many `key` holds, or all keys together."""
        with self._changed:
            return self._held.total() if key is None else self._held[key]

    def _others_active(self, key: Hashable) -> bool:
        now = time.monotonic()
        return (
            any(k != key for k in self._held)
            or any(k != key for k in self._waiting.values())
            or any(k != key and now - at < ACTIVE_S for k, at in self._last_use.items())
        )

    def _refusal(self, key: Hashable, ticket: int) -> str | None:
        """Why `key`'s waiter `ticket` may not take a slot now, or None."""
        if self._held[key] >= self.per_key:
            return "workspace"
        shared = self.shared_per_key
        if shared is not None and self._held[key] >= shared and self._others_active(key):
            return "shared"
        if self.total is not None and self._held.total() >= self.total:
            return "server"
        mine = (self._held[key], ticket)
        for other, other_key in self._waiting.items():
            eligible = other_key != key and self._held[other_key] < self.per_key
            if eligible and (self._held[other_key], other) < mine:
                return "server"  # another workspace's turn comes first
        return None

    @contextmanager
    def hold(
        self, key: Hashable, wait_s: float | None, cancel: Cancel | None = None
    ) -> Iterator[None]:
        """Hold one slot for `key` in the block (and one of the host's, with `host`); wait up
        to `wait_s` (None: for ever) for one to come free, then raise TooMany (the key's
        share is taken) or Busy. A waiter whose `cancel` is set leaves the queue
        (CallerGone)."""
        deadline = None if wait_s is None else time.monotonic() + wait_s
        if cancel is not None:
            cancel.waking(self._changed)
        with self._changed, self.watch.asking(key) as waits:
            ticket = next(self._tickets)
            self._waiting[ticket] = key
            try:
                while (bound := self._refusal(key, ticket)) is not None:
                    waits()
                    if cancel is not None:
                        cancel.check()
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise self._error(bound)
                    self._changed.wait(left)
            finally:
                del self._waiting[ticket]
                self._changed.notify_all()  # the waiter behind this one may go now
            self._held[key] += 1
        try:
            if self.host is None:
                yield
            else:
                with self.host.hold(key, deadline, cancel, self.watch):
                    yield
        finally:
            with self._changed:
                self._held[key] -= 1
                if not self._held[key]:
                    del self._held[key]
                now = time.monotonic()
                self._last_use[key] = now
                for old in [k for k, at in self._last_use.items() if now - at >= ACTIVE_S]:
                    del self._last_use[old]  # only the recent are kept
                self._changed.notify_all()

    def _error(self, bound: str) -> Busy | TooMany:
        if bound == "workspace":
            return TooMany(
                f"This workspace already has {self.per_key} {self.what}, the most one may "
                "at once, so others can be served too. Retry in 1 s."
            )
        if bound == "shared":
            return TooMany(
                f"This workspace already has {self.shared_per_key} {self.what}, its share "
                "while other workspaces use the server too. Retry in 1 s."
            )
        return Busy(f"The server already has {self.total} {self.what}, its most. Retry in 1 s.")
