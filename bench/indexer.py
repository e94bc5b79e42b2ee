"""EmbeddingsFollower figures on a fresh embedded Postgres:

- import of N short bullets (nodes/s) and embedding them with the fake provider (nodes/s);
- time from a committed edit to its vector being stored, with debounce 0 and 1500 ms;
- provider calls saved by the hash skip on a second reindex;
- chunks/s with the local model (needs the [local] extra; skipped otherwise, and with
  --local-chunks 0).

    python bench/indexer.py [--bullets 100000] [--edits 40] [--local-chunks 2000] [--corpus PATH]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.providers import CountingProvider

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences
from subspace import commands
from subspace.config import Settings
from subspace.database import Database, open_database
from subspace.indexer.chunking import text_hash
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.reindex import reembed
from subspace.ingest.outline import OutlineItem
from subspace.providers.fake import FakeProvider

BULLETS_PER_PAGE = 100


def short_bullets(count: int, corpus: Path = DEFAULT_CORPUS) -> list[str]:
    """Sentence-sized bullets from SciFact (or `corpus`), cut at 120 characters."""
    found: list[str] = []
    for _, text in abstracts(corpus):
        found.extend(s[:120] for s in sentences(text))
        if len(found) >= count:
            return found[:count]
    # Fewer sentences than asked for: repeat them with a number, so texts stay distinct.
    base = list(found)
    for i in itertools.count(1):
        found.extend(f"{s} ({i})" for s in base)
        if len(found) >= count:
            return found[:count]
    raise AssertionError


def import_bullets(db: Database, settings: Settings, bullets: list[str]) -> float:
    cx = db.default_context(settings)
    started = time.perf_counter()
    for page_index, start in enumerate(range(0, len(bullets), BULLETS_PER_PAGE)):
        items = [OutlineItem(text) for text in bullets[start : start + BULLETS_PER_PAGE]]
        commands.create_page_from_outline(cx, f"Notes {page_index}", items)
    return time.perf_counter() - started


def edit_latency(db: Database, settings: Settings, debounce_ms: int, edits: int) -> list[float]:
    """Seconds from an edit's commit to its vector being stored, with a running indexer."""
    cx = db.default_context(settings)
    indexer = EmbeddingsFollower(
        db, replace(settings, index_debounce_ms=debounce_ms), FakeProvider()
    )
    thread = threading.Thread(target=indexer.run, daemon=True)
    thread.start()
    with db.pool.connection() as conn:
        nodes = [r["id"] for r in conn.execute("select id from kb.nodes limit 500").fetchall()]
    rng = random.Random(7)
    latencies = []
    try:
        time.sleep(1.0)
        for i in range(edits):
            node_id = rng.choice(nodes)
            text = f"edited bullet {debounce_ms}-{i} {rng.random()}"
            commands.edit_node(cx, node_id, text)
            committed = time.perf_counter()
            digest = text_hash(text)
            while True:
                with db.pool.connection() as conn:
                    row = conn.execute(
                        "select 1 from search.embeddings where ref = %s and text_hash = %s",
                        (f"node:{node_id}", digest),
                    ).fetchone()
                if row is not None:
                    break
                time.sleep(0.002)
            latencies.append(time.perf_counter() - committed)
            time.sleep(0.05)
    finally:
        indexer.stop()
        thread.join(10)
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def local_chunks_per_second(
    db: Database, settings: Settings, count: int, corpus: Path = DEFAULT_CORPUS
) -> None:
    from subspace.providers.local import LocalProvider, local_extra_installed

    if count <= 0:
        print("local model: --local-chunks 0; skipped")
        return
    if not local_extra_installed():
        print("local model: the [local] extra is not installed; skipped")
        return
    provider = LocalProvider()
    texts = short_bullets(count, corpus)
    started = time.perf_counter()
    provider.embed(texts)
    raw = time.perf_counter() - started
    print(
        f"local model {provider.model}: {count} sentence chunks embedded in {raw:.1f} s "
        f"= {count / raw:.0f} chunks/s (model only)"
    )
    files = [t for _, t in itertools.islice(abstracts(corpus), count // 4)]
    started = time.perf_counter()
    provider.embed(files)
    raw = time.perf_counter() - started
    print(f"  {len(files)} abstract-sized chunks: {raw:.1f} s = {len(files) / raw:.0f} chunks/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bullets", type=int, default=100_000)
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument(
        "--local-chunks", type=int, default=2000, help="chunks the local model embeds (0: none)"
    )
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl, or another"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="fake", index_sweep_s=0)
        db = open_database(settings)
        try:
            bullets = short_bullets(args.bullets, args.corpus)
            took = import_bullets(db, settings, bullets)
            print(
                f"import of {len(bullets):,} bullets ({len(bullets) // BULLETS_PER_PAGE} pages): "
                f"{took:.1f} s = {len(bullets) / took:,.0f} nodes/s"
            )
            provider = CountingProvider()
            started = time.perf_counter()
            EmbeddingsFollower(db, settings, provider).drain(timeout_s=3600)
            took = time.perf_counter() - started
            print(
                f"embedding them (fake provider, HNSW index live): {took:.1f} s = "
                f"{len(provider.texts) / took:,.0f} chunks/s, {len(provider.texts):,} texts"
            )
            for debounce in (0, 1500):
                latencies = edit_latency(db, settings, debounce, args.edits)
                print(
                    f"edit to stored vector, debounce {debounce} ms: "
                    f"p50 {statistics.median(latencies) * 1000:.0f} ms, "
                    f"p95 {percentile(latencies, 95) * 1000:.0f} ms ({len(latencies)} edits)"
                )
            for run in (1, 2):
                counting = CountingProvider()
                started = time.perf_counter()
                items, outcome = reembed(db, settings, counting, None, lambda _: None)
                took = time.perf_counter() - started
                print(
                    f"reindex {run}: {items:,} items in {took:.1f} s; provider texts "
                    f"{outcome.embedded:,}, reused by hash {outcome.reused:,}"
                )
            local_chunks_per_second(db, settings, args.local_chunks, args.corpus)
        finally:
            db.close()


if __name__ == "__main__":
    main()
