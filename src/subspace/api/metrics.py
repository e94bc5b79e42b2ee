"""Prometheus metrics: one registry per app, fed by requests and searches, plus the indexer's
backlog and the query embedding's calls, read when /metrics is scraped."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from subspace.api.auth import require_admin
from subspace.api.metrics_files import all_processes
from subspace.floods import STEP_ASIDE_S
from subspace.indexer.status import indexer_status
from subspace.providers.breaker import OPEN, REASONS, breaker_for, index_stats_for
from subspace.search.lexical.index.layout import database_identity, index_root
from subspace.search.lexical.index.status import lexical_status
from subspace.search.request import SearchResponse

log = logging.getLogger(__name__)

# Seconds. Searches answer in milliseconds; the top buckets catch a provider timeout (2 s).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RESULT_BUCKETS = (0, 1, 5, 10, 20, 50, 100)  # rows a search returned (limit is at most 100)
UNMATCHED = "unmatched"  # the route label of a 404 for no route: paths would be unbounded

router = APIRouter()


class Metrics:
    """The app's metrics. Built by create_app and kept on app.state.metrics."""

    def __init__(self, app_state: Any) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.http_requests = Counter(
            "subspace_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=r,
        )
        self.http_seconds = Histogram(
            "subspace_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            ["method", "route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.search_seconds = Histogram(
            "subspace_search_duration_seconds",
            "End-to-end time of a search, by mode.",
            ["mode"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.leg_seconds = Histogram(
            "subspace_search_leg_duration_seconds",
            "Time of one leg of a search (the vector leg includes the query embedding).",
            ["leg"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.step_seconds = Histogram(
            "subspace_search_step_duration_seconds",
            "Time of one step of a search, by its name (search/steps.py: validate, prepare, "
            "scope, legs, fuse, group, browse, hydrate, explain, cursor, commit; aside, a"
            " flooding workspace's wait for the others' requests).",
            ["step"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.degraded = Counter(
            "subspace_search_degraded",
            "Searches answered without one of their legs, by leg and reason.",
            ["leg", "reason"],
            registry=r,
        )
        self.results = Histogram(
            "subspace_search_results",
            "Rows a search returned.",
            buckets=RESULT_BUCKETS,
            registry=r,
        )
        r.register(_ProcessState(app_state))
        # Read from the database and this host's index: the same whichever process is
        # scraped, so never summed over processes.
        self.shared = CollectorRegistry()
        self.shared.register(_DatabaseState(app_state))

    def observe_search(self, response: SearchResponse) -> None:
        self.search_seconds.labels(response.mode).observe(response.took_ms / 1000)
        self.results.observe(len(response.rows))
        for step, ms in response.steps.items():
            self.step_seconds.labels(step).observe(ms / 1000)
        for name, leg in response.legs.items():
            if leg.ran or leg.error:
                self.leg_seconds.labels(name).observe(leg.ms / 1000)
            if leg.error:
                reason = leg.error if leg.error in REASONS else "failed"
                self.degraded.labels(name, reason).inc()
        for line in response.degraded:  # a leg that ran without its index, or far behind it
            if line.startswith("lexical: ranked in Postgres"):
                self.degraded.labels("lexical", "no_index").inc()
            elif line.startswith("lexical: the lexical index is"):
                self.degraded.labels("lexical", "index_behind").inc()


class _ProcessState(Collector):
    """What this process holds, read when it is scraped or writes its snapshot: the database
    pools' use and the query embedding's calls from the provider's circuit breaker."""

    def __init__(self, app_state: Any) -> None:
        self.state = app_state

    def collect(self) -> Iterator[Metric]:
        provider = getattr(self.state, "provider", None)
        if provider is None:
            return
        labels = [provider.name, provider.model]
        yield from self._pools()
        yield from self._floods()
        breaker = breaker_for(provider)
        uses = (("query", breaker.stats), ("index", index_stats_for(provider)))
        seconds = SummaryMetricFamily(
            "subspace_provider_embedding_seconds",
            "Time of embedding calls to the provider (failed ones included), by use: a query's"
            " embedding for a search, or a batch of chunks for the indexer.",
            labels=["provider", "model", "use"],
        )
        errors = CounterMetricFamily(
            "subspace_provider_embedding_errors",
            "Embedding calls that failed, by use and reason (refused, timeout, error).",
            labels=["provider", "model", "use", "reason"],
        )
        for use, stats in uses:
            seconds.add_metric([*labels, use], count_value=stats.calls, sum_value=stats.seconds)
            for reason, count in sorted(stats.failures.items()):
                errors.add_metric([*labels, use, reason], count)
        yield seconds
        yield errors
        skipped = CounterMetricFamily(
            "subspace_provider_query_embedding_skipped",
            "Searches that did not ask the provider because its circuit was open.",
            labels=["provider", "model"],
        )
        skipped.add_metric(labels, breaker.stats.skipped)
        yield skipped
        circuit = GaugeMetricFamily(
            "subspace_provider_circuit_open",
            "1 while searches skip the provider (circuit open), else 0.",
            labels=["provider", "model"],
        )
        circuit.add_metric(labels, 1 if breaker.state == OPEN else 0)
        yield circuit

    def _floods(self) -> Iterator[Metric]:
        database = getattr(self.state, "database", None)
        if database is None:
            return
        floods = CounterMetricFamily(
            "subspace_flooding_requests",
            "Searches and transactions of a workspace flooding the server (one of its"
            " requests waited for its turn for a second without a break, beside another"
            " workspace), run on niced backends when one was free at once; by what it waited"
            " for.",
            labels=["waited_for"],
        )
        floods.add_metric(["searches"], database.search_runtime.searches.floods)
        floods.add_metric(["connections"], database.connection_shares.floods)
        yield floods
        yield CounterMetricFamily(
            "subspace_flood_steps_aside",
            "Checkpoints at which a flooding workspace's niced work waited for another"
            " workspace's requests running in the same process (in all at most"
            f" {STEP_ASIDE_S * 1000:.0f} ms a request).",
            value=database.precedence.stepped_aside,
        )

    def _pools(self) -> Iterator[Metric]:
        database = getattr(self.state, "database", None)
        if database is None:
            return
        pools = {"requests": database.request_pool, "reserved": database.pool}
        if database.yielding is not None:
            pools["yielding"] = database.yielding
        for name, help_text, stat in (
            ("size", "Most connections the pool may open.", "pool_max"),
            ("available", "Connections open and idle in the pool.", "pool_available"),
            ("waiting", "Requests waiting for a connection.", "requests_waiting"),
        ):
            gauge = GaugeMetricFamily(f"subspace_db_pool_{name}", help_text, labels=["pool"])
            for pool_name, pool in pools.items():
                stats = pool.get_stats()
                value = pool.max_size if stat == "pool_max" else stats.get(stat, 0)
                gauge.add_metric([pool_name], value)
            yield gauge


class _DatabaseState(Collector):
    """What is read from the database when /metrics is scraped: the indexer's backlog from
    the outbox, and the lexical index as this host has it."""

    def __init__(self, app_state: Any) -> None:
        self.state = app_state

    def collect(self) -> Iterator[Metric]:
        provider = getattr(self.state, "provider", None)
        if provider is not None:
            yield from self._indexer(provider.name, provider.model)

    def _indexer(self, provider_name: str, model: str) -> Iterator[Metric]:
        database = getattr(self.state, "database", None)
        if database is None:
            return
        try:
            # The reserved pool: a scrape must answer while requests hold every connection.
            with database.pool.connection(timeout=2) as conn:
                status = indexer_status(conn, provider_name, model)
        except Exception as exc:  # a scrape reports what it can; the gauge's absence says it
            log.warning("indexer status unavailable for /metrics: %s", exc)
            return
        yield from self._lexical(database)
        for name, help_text, value in (
            ("indexer_backlog", "Outbox events not yet indexed.", status.backlog),
            ("indexer_lag_seconds", "Age of the oldest event not yet indexed.", status.lag_seconds),
            ("indexer_retrying", "Events waiting for a retry after a failure.", status.retrying),
            ("indexer_dead_letters", "Events that failed for good.", status.dead_letters),
            ("indexer_waiting_items", "Items with writes not yet embedded.", status.waiting_items),
            (
                "indexer_healing_items",
                "Items queued because they lack vectors of the active "
                "model (after a change of model).",
                status.healing,
            ),
            (
                "indexer_wanted_texts",
                "Texts that should have a vector of the active model.",
                status.wanted,
            ),
            ("indexer_embedded_texts", "Vectors of the active model stored.", status.embeddings),
            (
                "indexer_embed_rate",
                "Texts embedded a second over the last minute.",
                status.rate_per_s,
            ),
            (
                "indexer_eta_seconds",
                "Seconds until every wanted text has a vector of the active "
                "model, at the current rate (0 when none is missing or nothing is moving).",
                status.eta_seconds or 0,
            ),
        ):
            gauge = GaugeMetricFamily(f"subspace_{name}", help_text)
            gauge.add_metric([], value)
            yield gauge

    def _lexical(self, database: Any) -> Iterator[Metric]:
        """The lexical index as this process's searches read it."""
        settings = getattr(self.state, "settings", None)
        if settings is None:
            return
        try:
            with database.pool.connection(timeout=2) as conn:
                reader = database.search_runtime.lexical_reader(
                    index_root(settings), lambda: database_identity(conn)
                )
                status = lexical_status(conn, settings, reader)
        except Exception as exc:
            log.warning("lexical index status unavailable for /metrics: %s", exc)
            return
        ready = GaugeMetricFamily(
            "subspace_lexical_index_ready",
            "1 while searches rank on the lexical index, 0 while it is (re)built and they rank "
            "in Postgres.",
        )
        ready.add_metric([], 0 if status.documents is None else 1)
        yield ready
        if status.documents is None or status.behind is None:
            return
        for name, help_text, value in (
            ("documents", "Documents in the lexical index.", status.documents),
            ("behind_events", "Outbox events the lexical index has not applied.",
             status.behind.events),
            ("behind_seconds", "Age of the oldest event the lexical index has not applied.",
             status.behind.oldest_s),
        ):  # fmt: skip
            gauge = GaugeMetricFamily(f"subspace_lexical_index_{name}", help_text)
            gauge.add_metric([], value)
            yield gauge


def is_loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback  # ::ffff:127.0.0.1 from a dual-stack socket
    return address.is_loopback


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """Prometheus text format. Open to clients on loopback; others need an admin key."""
    if not is_loopback(request):
        require_admin(request)
    metrics: Metrics = request.app.state.metrics
    processes = getattr(request.app.state, "metrics_dir", None)
    own = generate_latest(metrics.registry)
    if processes is not None:  # a web process of several: every one's, summed
        own = all_processes(processes, own)
    return Response(own + generate_latest(metrics.shared), media_type=CONTENT_TYPE_LATEST)
