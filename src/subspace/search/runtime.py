"""What searches share while a process runs: the vector leg's threads and the base sizes seen."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from uuid import UUID

LEG_THREADS = 8  # vector legs running beside a lexical one at once; more run on one connection
LARGE_BASE_TTL_S = 60.0  # how long a base found to hold EXACT_SCAN_ROWS vectors stays "large"


class LargeBases:
    """Knowledge bases found to hold many vectors of a model, and when; kept for `ttl_s`.

    Counting a large base costs more than searching it, so one found large is trusted for a
    while. Thread-safe: searches running at once read and update it.
    """

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._seen: dict[tuple[str, UUID], tuple[float, int]] = {}  # -> (when, count then)
        self._lock = threading.Lock()

    def size(self, model: str, kb_id: UUID, *, at_least: int) -> int | None:
        """The count remembered for the base, if it was at least `at_least` within the TTL."""
        with self._lock:
            seen, counted = self._seen.get((model, kb_id), (0.0, 0))
        if counted >= at_least and time.monotonic() - seen < self.ttl_s:
            return counted
        return None

    def remember(self, model: str, kb_id: UUID, count: int) -> None:
        with self._lock:
            self._seen[(model, kb_id)] = (time.monotonic(), count)

    def forget(self, model: str, kb_id: UUID) -> None:
        """Count the base again next time. Safe to call for a base never remembered."""
        with self._lock:
            self._seen.pop((model, kb_id), None)


class SearchRuntime:
    """The state searches share, created once per Database (by the app, the CLI or a test)
    and closed with it; nothing of it lives on a module, so two runtimes share nothing."""

    def __init__(self, *, large_base_ttl_s: float = LARGE_BASE_TTL_S) -> None:
        # Threads start on first use, so a process that never searches starts none.
        self.leg_threads = ThreadPoolExecutor(
            max_workers=LEG_THREADS, thread_name_prefix="vector-leg"
        )
        self.large_bases = LargeBases(large_base_ttl_s)

    def close(self) -> None:
        """Wait for the legs running, then stop the threads. Safe to call twice."""
        self.leg_threads.shutdown(wait=True, cancel_futures=True)
