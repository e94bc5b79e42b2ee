"""A circuit breaker for query embeddings: a failing provider is skipped, not waited for."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FAILURES_TO_OPEN = 3  # failures in a row before searches stop asking the provider
COOL_DOWN_S = 30.0  # how long an open circuit refuses before one probe is let through
REASONS = ("refused", "timeout", "error")  # why a query embedding failed, as searches report it

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"
_TIMEOUT_NAMES = ("Timeout", "TimeoutError", "TimeoutException")


def failure_reason(exc: BaseException) -> str:
    """`refused`, `timeout` or `error`, from the exception and the ones it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        reason = getattr(current, "reason", None)
        if reason in REASONS:
            return str(reason)
        if isinstance(current, ConnectionRefusedError) or (
            isinstance(current, OSError) and current.errno == errno.ECONNREFUSED
        ):
            return "refused"
        # httpx's and openai's timeouts do not derive from TimeoutError.
        if isinstance(current, TimeoutError) or type(current).__name__.endswith(_TIMEOUT_NAMES):
            return "timeout"
        current = current.__cause__ or current.__context__
    return "error"


@dataclass
class CallStats:
    """Query embedding calls made through one breaker: counts and time, for /metrics."""

    calls: int = 0
    seconds: float = 0.0
    failures: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    skipped: int = 0  # searches that did not call the provider because the circuit was open

    def record(self, seconds: float, reason: str | None = None) -> None:
        """Count one call; `reason` is None for a success. Callers hold whatever lock
        serialises their calls (the breaker's, or the indexer's single thread)."""
        self.calls += 1
        self.seconds += seconds
        if reason is not None:
            self.failures[reason] = self.failures.get(reason, 0) + 1


class CircuitBreaker:
    """Closed: every call goes through. After `failures_to_open` failures in a row it opens
    and refuses calls for `cool_down_s`; then one probe call goes through (half open), and
    its outcome closes the circuit or opens it for another cool-down. Thread-safe.
    """

    def __init__(
        self,
        failures_to_open: int = FAILURES_TO_OPEN,
        cool_down_s: float = COOL_DOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures_to_open = failures_to_open
        self.cool_down_s = cool_down_s
        self.clock = clock
        self.state = CLOSED
        self.failures_in_a_row = 0
        self.last_reason = ""
        self.stats = CallStats()
        self._opened_at = 0.0
        self._lock = threading.Lock()

    def allow(self) -> bool:
        """Whether a call may go to the provider now; False counts a skipped call."""
        with self._lock:
            if self.state == OPEN and self.clock() - self._opened_at >= self.cool_down_s:
                self.state = HALF_OPEN  # this caller is the probe
                return True
            if self.state == CLOSED:
                return True
            self.stats.skipped += 1
            return False

    def record_success(self, seconds: float) -> None:
        with self._lock:
            self.stats.record(seconds)
            self.state = CLOSED
            self.failures_in_a_row = 0

    def record_failure(self, reason: str, seconds: float) -> None:
        with self._lock:
            self.stats.record(seconds, reason)
            self.failures_in_a_row += 1
            self.last_reason = reason
            if self.state == HALF_OPEN or self.failures_in_a_row >= self.failures_to_open:
                self.state = OPEN
                self._opened_at = self.clock()


_attach_lock = threading.Lock()


def breaker_for(provider: object) -> CircuitBreaker:
    """The provider's breaker, created on first use and kept on the provider object, so
    each app (and each test) that builds its own provider starts with a closed circuit."""
    breaker = getattr(provider, "query_breaker", None)
    if isinstance(breaker, CircuitBreaker):
        return breaker
    with _attach_lock:
        breaker = getattr(provider, "query_breaker", None)
        if not isinstance(breaker, CircuitBreaker):
            breaker = CircuitBreaker()
            provider.query_breaker = breaker  # type: ignore[attr-defined]
        return breaker


def index_stats_for(provider: object) -> CallStats:
    """The provider's indexing calls (batches of chunks), kept on the provider like its
    breaker; the indexer records into it and /metrics reads it."""
    stats = getattr(provider, "index_call_stats", None)
    if isinstance(stats, CallStats):
        return stats
    with _attach_lock:
        stats = getattr(provider, "index_call_stats", None)
        if not isinstance(stats, CallStats):
            stats = CallStats()
            provider.index_call_stats = stats  # type: ignore[attr-defined]
        return stats
