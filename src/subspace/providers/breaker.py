"""A circuit breaker for query embeddings: a failing provider is skipped, not waited for."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

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
T = TypeVar("T")


def _attached(provider: object, name: str, kind: type[T]) -> T:
    """The `kind` object kept on the provider under `name`, created on first use, so each app
    (and each test) that builds its own provider starts afresh."""
    found = getattr(provider, name, None)
    if isinstance(found, kind):
        return found
    with _attach_lock:
        found = getattr(provider, name, None)
        if not isinstance(found, kind):
            found = kind()
            setattr(provider, name, found)
        return found


def breaker_for(provider: object) -> CircuitBreaker:
    """The provider's breaker for query embeddings."""
    return _attached(provider, "query_breaker", CircuitBreaker)


def index_stats_for(provider: object) -> CallStats:
    """The provider's indexing calls (batches of chunks): the indexer records into it and
    /metrics reads it."""
    return _attached(provider, "index_call_stats", CallStats)
