"""The metrics of several web processes in one scrape.

A scrape reaches one web process of `subspace serve`, which knows only its own counters. So
each web process writes its registry's text to a file of its own in a folder they share
(the supervisor's, under SUBSPACE_HOME) once a second, and the scraped one adds up every
file: counters, histograms and summaries summed by name and labels (a dead process's
counts still count, as a counter never goes down); gauges (the pools' sizes and use) are
each live process's own, told apart by a `process` label.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from subspace.db.embedded import process_alive

log = logging.getLogger(__name__)

SNAPSHOT_S = 1.0  # how stale another process's figures may be in a scrape
SUFFIX = ".prom"


def write_snapshot(folder: Path, text: bytes) -> None:
    """This process's figures, replacing its last file at once (a reader never sees half)."""
    path = folder / f"{os.getpid()}{SUFFIX}"
    partial = path.with_suffix(".tmp")
    partial.write_bytes(text)
    partial.replace(path)


class SnapshotWriter:
    """A daemon thread writing `registry` to `folder` every SNAPSHOT_S until stopped."""

    def __init__(self, folder: Path, registry: CollectorRegistry) -> None:
        self.folder, self.registry = folder, registry
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-snapshot", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(SNAPSHOT_S):
            try:
                write_snapshot(self.folder, generate_latest(self.registry))
            except OSError as exc:  # a full disk costs the others' view of us, not a request
                log.warning("cannot write this process's metrics to %s: %s", self.folder, exc)


def all_processes(folder: Path, own: bytes) -> bytes:
    """Every web process's figures added up, this process's `own` as they are now."""
    write_snapshot(folder, own)
    texts: list[tuple[int, bool, str]] = []
    for path in folder.glob(f"*{SUFFIX}"):
        try:
            pid = int(path.stem)
            texts.append((pid, process_alive(pid), path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # replaced or removed as it was read: its next file is counted
    registry = CollectorRegistry()
    registry.register(_Summed(texts))
    return generate_latest(registry)


class _Summed(Collector):
    def __init__(self, texts: Iterable[tuple[int, bool, str]]) -> None:
        self.texts = texts

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
        for pid, alive, text in self.texts:
            for family in text_string_to_metric_families(text):
                gauge = family.type == "gauge"
                if gauge and not alive:
                    continue
                if family.name not in families:
                    families[family.name] = Metric(family.name, family.documentation, family.type)
                    values[family.name] = {}
                summed = values[family.name]
                for sample in family.samples:
                    labels = {**sample.labels, "process": str(pid)} if gauge else sample.labels
                    key = (sample.name, tuple(sorted(labels.items())))
                    if sample.name.endswith("_created"):  # when it began: the earliest
                        summed[key] = min(summed.get(key, sample.value), sample.value)
                    else:
                        summed[key] = summed.get(key, 0.0) + sample.value
        for name, metric in families.items():
            for (sample_name, pairs), value in values[name].items():
                metric.add_sample(sample_name, dict(pairs), value)
            yield metric
