"""/metrics (Prometheus text), request ids and the JSON request log line."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from subspace import commands
from subspace.api.app import create_app
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database
from subspace.db.pool import Conn
from subspace.keys import create_key
from subspace.logs import JsonFormatter
from subspace.models import Actor
from subspace.providers.base import EmbedResult
from subspace.providers.fake import FakeProvider
from tests.search_helpers import follow, index

LOOPBACK = ("127.0.0.1", 50000)


def key(database: Database, actor: Actor, *, admin: bool = False) -> str:
    conn: Conn
    with database.pool.connection() as conn:
        return create_key(conn, actor, "metrics", admin=admin)[1]


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in Prometheus text, or None when it is absent."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        got_name, _, rest = head.partition("{")
        found = dict(re.findall(r'(\w+)="([^"]*)"', rest))
        if got_name == name and found == labels:
            return float(value)
    return None


def loopback_client(database: Database, settings: Settings, actor: Actor) -> TestClient:
    client = TestClient(create_app(settings, database), client=LOOPBACK)
    client.headers["authorization"] = f"Bearer {key(database, actor)}"
    return client


class RefusingProvider(FakeProvider):
    def embed(self, texts: Sequence[str]) -> EmbedResult:
        raise ConnectionRefusedError(111, "Connection refused")


def test_requests_and_searches_are_counted_by_route_template(
    database: Database, settings: Settings, cx: Context
) -> None:
    page = commands.create_page(cx, "Metrics")
    other = commands.create_page(cx, "Other")
    commands.add_node(cx, page.id, "counted words")
    index(database, cx)
    client = loopback_client(database, settings, cx.actor)
    for page_id in (page.id, other.id):
        assert client.get(f"/api/pages/{page_id}").status_code == 200
    assert client.post("/api/search", json={"query": "counted words"}).status_code == 200
    assert client.get("/no/such/path").status_code == 404
    text = client.get("/metrics").text
    route = {"method": "GET", "route": "/api/pages/{page_id}", "status": "200"}
    assert sample(text, "subspace_http_requests_total", **route) == 2
    assert sample(text, "subspace_http_requests_total", method="GET", route="unmatched",
                  status="404") == 1  # fmt: skip
    assert sample(text, "subspace_search_duration_seconds_count", mode="hybrid") == 1
    assert sample(text, "subspace_search_leg_duration_seconds_count", leg="lexical") == 1
    assert sample(text, "subspace_search_leg_duration_seconds_count", leg="vector") == 1
    for step in ("validate", "prepare", "scope", "legs", "fuse", "group", "hydrate", "cursor",
                 "commit"):  # fmt: skip
        assert sample(text, "subspace_search_step_duration_seconds_count", step=step) == 1, step
    assert sample(text, "subspace_search_step_duration_seconds_count", step="browse") is None
    assert sample(text, "subspace_search_results_sum") == 1
    assert sample(text, "subspace_indexer_backlog") == 0
    fake = {"provider": "fake", "model": FakeProvider.model}
    assert sample(text, "subspace_provider_embedding_seconds_count", **fake, use="query") == 1
    # The app's own provider did no indexing; the test's indexer used another.
    assert sample(text, "subspace_provider_embedding_seconds_count", **fake, use="index") == 0
    # A second app keeps its own counts.
    fresh = loopback_client(database, settings, cx.actor).get("/metrics").text
    assert sample(fresh, "subspace_http_requests_total", **route) is None


def test_searches_from_every_surface_are_counted(
    database: Database, settings: Settings, cx: Context
) -> None:
    """Agents' searches (/api/tools, /mcp) and the Sim-compatible endpoint's count as
    searches too, not only /api/search's."""
    page = commands.create_page(cx, "Metrics")
    commands.add_node(cx, page.id, "counted words")
    index(database, cx)
    mcp_headers = {"accept": "application/json, text/event-stream"}
    with loopback_client(database, settings, cx.actor) as client:
        kb = client.get("/api/knowledge-bases").json()[0]["id"]
        assert client.post(
            "/api/tools/kb.search", json={"arguments": {"query": "counted"}}
        ).is_success
        sim = client.post(
            "/api/v1/knowledge/search", json={"knowledgeBaseIds": kb, "query": "counted"}
        )
        assert sim.is_success, sim.text
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "kb.search", "arguments": {"query": "counted words"}},
        }
        mcp = client.post("/mcp", json=call, headers=mcp_headers)
        assert mcp.json()["result"]["isError"] is False, mcp.text
        text = client.get("/metrics").text
    assert sample(text, "subspace_search_duration_seconds_count", mode="hybrid") == 3
    tools_route = {"method": "POST", "route": "/api/tools/{name}", "status": "200"}
    assert sample(text, "subspace_http_requests_total", **tools_route) == 1


def test_the_indexer_backlog_is_read_when_scraped(
    database: Database, settings: Settings, cx: Context
) -> None:
    client = loopback_client(database, settings, cx.actor)
    page = commands.create_page(cx, "Waiting")
    commands.add_node(cx, page.id, "not yet indexed")
    text = client.get("/metrics").text
    backlog = sample(text, "subspace_indexer_backlog")
    assert backlog is not None
    assert backlog >= 2
    assert sample(text, "subspace_indexer_waiting_items") == 1
    refusing = RefusingProvider()
    client.app.state.provider = refusing  # type: ignore[attr-defined]
    index(database, cx, refusing)
    text = client.get("/metrics").text
    fake = {"provider": "fake", "model": FakeProvider.model}
    assert sample(text, "subspace_provider_embedding_errors_total", **fake, use="index",
                  reason="refused") == 1  # fmt: skip
    retrying = sample(text, "subspace_indexer_retrying")
    assert retrying is not None
    assert retrying >= 1
    client.app.state.provider = provider = FakeProvider()  # type: ignore[attr-defined]
    with database.pool.connection() as conn:  # the retry is due now, not after its backoff
        conn.execute("update search.embedding_queue set retry_at = now()")
    index(database, cx, provider)
    text = client.get("/metrics").text
    assert sample(text, "subspace_indexer_backlog") == 0
    assert sample(text, "subspace_provider_embedding_seconds_count", **fake, use="index") == 1


def test_degraded_searches_are_counted_by_reason(
    database: Database, settings: Settings, cx: Context
) -> None:
    follow(database, cx)  # the lexical index is built: the lexical leg is not degraded
    client = loopback_client(database, settings, cx.actor)
    client.app.state.provider = RefusingProvider()  # type: ignore[attr-defined]
    for n in range(4):
        body = client.post("/api/search", json={"query": f"anything {n}"}).json()
        assert body["degraded"] == ["vector: refused"]
    text = client.get("/metrics").text
    assert sample(text, "subspace_search_degraded_total", leg="vector", reason="refused") == 4
    labels = {"provider": "fake", "model": FakeProvider.model}
    # Three calls failed and opened the circuit; the fourth search skipped the provider.
    assert sample(text, "subspace_provider_embedding_errors_total", **labels, use="query",
                  reason="refused") == 3  # fmt: skip
    assert sample(text, "subspace_provider_query_embedding_skipped_total", **labels) == 1
    assert sample(text, "subspace_provider_circuit_open", **labels) == 1


def test_metrics_need_an_admin_key_off_loopback(
    database: Database, settings: Settings, actor: Actor
) -> None:
    app = create_app(settings, database)
    remote = TestClient(app, client=("203.0.113.7", 40000))
    assert remote.get("/metrics").status_code == 401
    user = {"authorization": f"Bearer {key(database, actor)}"}
    assert remote.get("/metrics", headers=user).status_code == 403
    admin = {"authorization": f"Bearer {key(database, actor, admin=True)}"}
    assert remote.get("/metrics", headers=admin).status_code == 200
    for host in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        assert TestClient(app, client=(host, 40000)).get("/metrics").status_code == 200


def test_each_response_carries_a_request_id(client: TestClient) -> None:
    answer = client.get("/healthz")
    assert answer.status_code == 200
    first = answer.headers["x-request-id"]
    second = client.get("/healthz").headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first != second
    kept = client.get("/healthz", headers={"x-request-id": "edge-42"})
    assert kept.headers["x-request-id"] == "edge-42"
    forged = client.get("/healthz", headers={"x-request-id": 'a" injected=1'})
    assert re.fullmatch(r"[0-9a-f]{32}", forged.headers["x-request-id"])


@pytest.mark.parametrize("level", ["info", "debug"])
def test_json_logs_give_one_line_per_request_without_the_query_below_debug(
    database: Database, settings: Settings, cx: Context, caplog: pytest.LogCaptureFixture,
    level: str,
) -> None:  # fmt: skip
    settings = replace(settings, log_format="json", log_level=level)
    client = TestClient(create_app(settings, database))
    client.headers["authorization"] = f"Bearer {key(database, cx.actor)}"
    with caplog.at_level(logging.INFO, logger="subspace.requests"):
        response = client.post("/api/search", json={"query": "secret plans", "mode": "lexical"})
    records = [r for r in caplog.records if r.name == "subspace.requests"]
    assert len(records) == 1
    line = JsonFormatter().format(records[0])
    assert "\n" not in line
    logged = json.loads(line)
    assert logged["request_id"] == response.headers["x-request-id"]
    assert logged["route"] == "/api/search"
    assert logged["status"] == 200
    assert logged["duration_ms"] > 0
    assert logged["search"]["mode"] == "lexical"
    assert set(logged["search"]["legs"]) == {"lexical"}
    assert ("secret plans" in line) == (level == "debug")


def test_the_lexical_index_reports_its_documents_and_how_far_behind_it_is(
    database: Database, settings: Settings, cx: Context
) -> None:
    client = loopback_client(database, settings, cx.actor)
    assert sample(client.get("/metrics").text, "subspace_lexical_index_ready") == 0
    assert client.post("/api/search", json={"query": "anything"}).json()["degraded"]
    page = commands.create_page(cx, "Gauges")
    commands.add_node(cx, page.id, "a bullet the index holds")
    follow(database, cx)
    text = client.get("/metrics").text
    assert sample(text, "subspace_lexical_index_ready") == 1
    assert sample(text, "subspace_lexical_index_documents") == 2  # the title and the bullet
    assert sample(text, "subspace_lexical_index_behind_events") == 0
    commands.add_node(cx, page.id, "a bullet written since")
    text = client.get("/metrics").text
    assert sample(text, "subspace_lexical_index_behind_events") == 1
    assert sample(text, "subspace_search_degraded_total", leg="lexical", reason="no_index") == 1
