"""Exact-token suite: identifiers among look-alikes in a 20,003-chunk workspace.

Every identifier query (ticket keys, error codes, SKUs, versions, hostnames, e-mail addresses)
should put its chunk in the top 3 under hybrid search; vector-only and lexical-only are shown
beside it. Fake provider, fresh embedded Postgres.

    python bench/exact_tokens.py [--per-kind 10] [--total 20003] [--corpus PATH]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, abstracts, sentences
from subspace import commands
from subspace.config import Settings
from subspace.database import open_database
from subspace.db.vector_index import defer_vector_index
from subspace.indexer.embeddings import EmbeddingsFollower
from subspace.indexer.reindex import VECTOR_INDEX_SQL
from subspace.ingest.outline import OutlineItem
from subspace.providers.fake import FakeProvider
from subspace.search.request import SearchRequest
from subspace.search.service import search

TOTAL = 20_003  # chunks: each identifier's and its look-alikes', the rest SciFact fillers


def identifiers(rng: random.Random, per_kind: int) -> dict[str, list[tuple[str, list[str]]]]:
    """Per kind: (identifier, look-alikes) pairs."""

    def ticket() -> tuple[str, list[str]]:
        n = rng.randint(1000, 9999)
        return f"PROJ-{n}", [f"PROJ-{n + 1}", f"PROJ-{str(n)[::-1]}", f"PROJ-{n}0", f"PRJ-{n}"]

    def error() -> tuple[str, list[str]]:
        n = rng.randint(0x1000, 0xFFFF)
        return f"0x8007{n:04X}", [f"0x8007{n + 1:04X}", f"0x8008{n:04X}", f"0x0007{n:04X}"]

    def sku() -> tuple[str, list[str]]:
        n = rng.randint(10, 99)
        size = rng.choice(["XL", "SM", "MD"])
        return f"SKU-{n}-{size}", [f"SKU-{n + 1}-{size}", f"SKU-{n}-XS", f"SKU-{n}{size}"]

    def version() -> tuple[str, list[str]]:
        a, b, c = rng.randint(1, 9), rng.randint(0, 20), rng.randint(0, 30)
        return f"v{a}.{b}.{c}", [f"v{a}.{b}.{c + 1}", f"v{a}.{b + 1}.{c}", f"v{a}.{c}.{b}"]

    def host() -> tuple[str, list[str]]:
        name = rng.choice(["api", "db", "cache", "queue", "auth"]) + str(rng.randint(1, 99))
        zone = rng.choice(["eu", "us", "ap"])
        return f"{name}.{zone}.example.com", [f"{name}.{zone}.example.org",
                                              f"{name}x.{zone}.example.com"]  # fmt: skip

    def email() -> tuple[str, list[str]]:
        user = rng.choice(["ana", "ravi", "li", "sam", "noor"]) + str(rng.randint(1, 999))
        return f"{user}@example.com", [f"{user}@example.org", f"{user}1@example.com"]

    makers = {"ticket key": ticket, "error code": error, "SKU": sku, "version": version,
              "hostname": host, "e-mail": email}  # fmt: skip
    return {kind: [make() for _ in range(per_kind)] for kind, make in makers.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-kind", type=int, default=10)
    parser.add_argument(
        "--total",
        type=int,
        default=TOTAL,
        help="chunks in the workspace; fewer than the identifiers and look-alikes adds no filler",
    )
    parser.add_argument(
        "--corpus", type=Path, default=DEFAULT_CORPUS, help="SciFact corpus.jsonl, or another"
    )
    args = parser.parse_args()
    rng = random.Random(20003)
    fillers = [s[:160] for _, text in abstracts(args.corpus) for s in sentences(text)]
    ids = identifiers(rng, args.per_kind)
    chunks: list[str] = []
    targets: list[tuple[str, str, int]] = []  # kind, identifier, chunk index
    for kind, pairs in ids.items():
        for identifier, look_alikes in pairs:
            targets.append((kind, identifier, len(chunks)))
            chunks.append(f"{rng.choice(fillers)} See {identifier} for details.")
            chunks.extend(
                f"{rng.choice(fillers)} See {alike} for details." for alike in look_alikes
            )
    chunks.extend(rng.choice(fillers) for _ in range(args.total - len(chunks)))
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(home=Path(tmp) / "home", providers="fake", index_sweep_s=0)
        db = open_database(settings)
        try:
            cx = db.default_context(settings)
            node_of: list[object] = []
            for start in range(0, len(chunks), 100):
                page = commands.create_page_from_outline(
                    cx, f"Log {start // 100}", [OutlineItem(c) for c in chunks[start : start + 100]]
                )
                with cx.transaction() as conn:
                    node_of.extend(r["id"] for r in conn.execute(
                        "select id from kb.nodes where page_id = %s order by position",
                        (page.id,)))  # fmt: skip
            with db.pool.connection() as conn:
                defer_vector_index(conn, FakeProvider.model, FakeProvider.dimensions)
            EmbeddingsFollower(db, settings, FakeProvider()).drain(timeout_s=3600)
            with db.pool.connection() as conn:
                conn.execute(VECTOR_INDEX_SQL)
                conn.execute("analyze")
            print(f"{len(chunks):,} chunks, {len(targets)} identifier queries "
                  f"({args.per_kind} per kind), fake provider")  # fmt: skip
            print(f"{'kind':<12} {'hybrid top 3':>13} {'lexical top 3':>14} {'vector top 3':>13}")
            totals = dict.fromkeys(("hybrid", "lexical", "vector"), 0)
            for kind in ids:
                hits = dict.fromkeys(totals, 0)
                for k, identifier, index in targets:
                    if k != kind:
                        continue
                    for mode in hits:
                        rows = search(
                            cx,
                            db.searcher(FakeProvider()),
                            SearchRequest(query=identifier, mode=mode, kinds=["node"], limit=3),
                        ).rows
                        hits[mode] += node_of[index] in [r.id for r in rows]
                n = args.per_kind
                print(
                    f"{kind:<12} {hits['hybrid']:>10}/{n:<2} {hits['lexical']:>11}/{n:<2} "
                    f"{hits['vector']:>10}/{n:<2}"
                )
                for mode in totals:
                    totals[mode] += hits[mode]
            n = len(targets)
            print(
                f"{'all':<12} "
                + " ".join(f"{totals[m] / n:>12.0%}" for m in ("hybrid", "lexical", "vector"))
            )
        finally:
            db.close()


if __name__ == "__main__":
    main()
