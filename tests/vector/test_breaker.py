"""The query embedding's circuit breaker: a failing provider is skipped, with the right reason."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

from subspace import commands
from subspace.context import Context
from subspace.database import Database
from subspace.providers.base import EmbedResult
from subspace.providers.breaker import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    CircuitBreaker,
    breaker_for,
    failure_reason,
)
from subspace.providers.fake import FakeProvider
from subspace.providers.registry import create_provider
from subspace.search.shared import SearchRuntime
from subspace.search.vector import EmbeddingUnavailable, embed_query
from tests.search_helpers import follow, ids, run


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_searches_stop_asking_a_provider_that_refuses_connections(
    database: Database, cx: Context
) -> None:
    page = commands.create_page(cx, "Breaker")
    node = commands.add_node(cx, page.id, "lexical answers while the provider is down")
    follow(database, cx)
    settings = replace(
        cx.settings,
        providers="openai",
        openai_api_key="sk-dummy",
        openai_base_url=f"http://127.0.0.1:{closed_port()}/v1",
    )
    provider = create_provider(settings)
    responses = [run(database, cx, f"lexical answers {n}", provider) for n in range(10)]
    assert responses[0].degraded == ["vector: refused"]
    assert responses[9].degraded == ["vector: refused"]
    assert ids(responses[9]) == [node.id]
    breaker = breaker_for(provider)
    assert breaker.state == OPEN
    assert breaker.last_reason == "refused"
    # Three calls reached the provider; the other seven searches did not wait for it.
    assert breaker.stats.calls == 3
    assert breaker.stats.skipped == 7
    assert breaker.stats.failures["refused"] == 3


class SlowProvider(FakeProvider):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        self.calls += 1
        time.sleep(0.3)
        return super().embed(texts)


def test_a_provider_that_times_out_is_reported_as_timeout_and_then_skipped() -> None:
    provider = SlowProvider()
    runtime = SearchRuntime()
    reasons = []
    try:
        for n in range(5):
            with pytest.raises(EmbeddingUnavailable) as caught:
                embed_query(runtime, provider, f"slow {n}", timeout_s=0.02)
            reasons.append(caught.value.reason)
    finally:
        runtime.close()
    assert reasons == ["timeout"] * 5
    assert provider.calls == 3
    assert breaker_for(provider).state == OPEN


def test_a_probe_after_the_cool_down_closes_or_reopens_the_circuit() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures_to_open=3, cool_down_s=30, clock=lambda: now[0])
    for _ in range(2):
        assert breaker.allow()
        breaker.record_failure("refused", 0.01)
    assert breaker.state == CLOSED
    assert breaker.allow()
    breaker.record_failure("refused", 0.01)
    assert breaker.state == OPEN
    assert not breaker.allow()
    now[0] = 29.0
    assert not breaker.allow()
    now[0] = 30.0
    assert breaker.allow()
    assert breaker.state == HALF_OPEN
    assert not breaker.allow()  # one probe at a time
    breaker.record_failure("timeout", 2.0)
    assert breaker.state == OPEN
    assert breaker.last_reason == "timeout"
    now[0] = 59.0
    assert not breaker.allow()
    now[0] = 60.0
    assert breaker.allow()
    breaker.record_success(0.05)
    assert breaker.state == CLOSED
    assert breaker.failures_in_a_row == 0
    assert breaker.allow()
    assert breaker.stats.skipped == 4
    assert breaker.stats.calls == 5


def test_a_success_resets_the_count_of_failures_in_a_row() -> None:
    breaker = CircuitBreaker(failures_to_open=3)
    for outcome in ("error", "error", "ok", "error", "error"):
        assert breaker.allow()
        if outcome == "ok":
            breaker.record_success(0.01)
        else:
            breaker.record_failure(outcome, 0.01)
    assert breaker.state == CLOSED


class ReadTimeout(Exception):
    """Named like httpx.ReadTimeout, which does not derive from TimeoutError."""


def _raised_from(cause: BaseException) -> Exception:
    try:
        try:
            raise cause
        except BaseException as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "refused"),
        (_raised_from(ConnectionRefusedError(111, "Connection refused")), "refused"),
        (TimeoutError("read timed out"), "timeout"),
        (_raised_from(TimeoutError()), "timeout"),
        (ReadTimeout("timed out"), "timeout"),  # httpx's timeouts are not TimeoutErrors
        (RuntimeError("connection refused"), "error"),  # words are not a refusal
        (ValueError("bad vector"), "error"),
    ],
)
def test_failure_reasons(exc: BaseException, reason: str) -> None:
    assert failure_reason(exc) == reason
