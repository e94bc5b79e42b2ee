"""How long a provider waits before trying a failed HTTP call again."""

from __future__ import annotations

import random
from typing import Any

BACKOFF_BASE_S = 0.5  # first wait; doubles per attempt
BACKOFF_MAX_S = 20.0  # longest wait, also the cap on a server's Retry-After


def backoff(attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (from 1): exponential with jitter,
    so clients that failed together do not come back together."""
    return float(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (attempt - 1)) * random.uniform(0.5, 1))


def retry_after(exc: Any) -> float | None:
    """The seconds a 429's Retry-After header asks for (at most BACKOFF_MAX_S), or None when the
    error carries no readable header."""
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = headers.get("retry-after")
    try:
        return min(BACKOFF_MAX_S, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None
