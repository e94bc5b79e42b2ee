"""Gibberish on a real collection: how often a query of made-up words finds rows, and why.

Loads a collection as `subspace eval` does (a judged workspace such as tests/relevance/real,
or a BEIR folder) into a fresh database, then searches it, as the palette does (hybrid, every
kind), with --queries made-up queries of one to three pronounceable words (two or three
consonant-vowel pairs and an optional closing consonant: "flurbo", "decozo", "vorir"), the
same on every run. Such words sit near real ones, so they are what typo correction is most
tempted by. Prints, by the number of words, how many queries found rows, how many of those a
spelling correction made (with the corrections), and how many rows only the vector leg gave.

    python bench/gibberish.py DATASET_DIR [--queries 200] [--provider onnx] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace.config import Settings
from subspace.evaluation.runner import CachingProvider, loaded_database, read_dataset
from subspace.providers.registry import create_provider
from subspace.search.request import SearchRequest
from subspace.search.service import search

SEED = 7
CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"
EXAMPLES = 10  # queries that found rows, shown with what found them


def made_up_queries(count: int) -> list[str]:
    """`count` queries of one to three made-up words, the same on every run."""
    rng = random.Random(SEED)

    def word() -> str:
        pairs = "".join(
            rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(rng.choice((2, 3)))
        )
        return pairs + rng.choice(("", "r", "n", "s", "t"))

    return [" ".join(word() for _ in range(rng.choice((1, 2, 3)))) for _ in range(count)]


def measure(dataset_dir: Path, count: int, provider_name: str | None) -> dict[str, Any]:
    settings = Settings.from_env()
    provider = CachingProvider(
        create_provider(settings, provider_name), settings.home / "eval-cache"
    )
    by_words: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    examples: list[dict[str, Any]] = []
    with loaded_database(settings, read_dataset(dataset_dir), provider) as (db, cx, _):
        searcher = db.searcher(provider)
        for query in made_up_queries(count):
            response = search(cx, searcher, SearchRequest(query=query, limit=10))
            tally = by_words[len(query.split())]
            tally["queries"] += 1
            if not response.rows:
                continue
            tally["found"] += 1
            tally["corrected"] += bool(response.corrections)
            tally["vector_only"] += all(set(row.legs) == {"vector"} for row in response.rows)
            if len(examples) < EXAMPLES:
                examples.append({"query": query, "corrections": response.corrections,
                                 "first": response.rows[0].title})  # fmt: skip
    return {
        "dataset": dataset_dir.name,
        "model": provider.model,
        "queries": count,
        "by_words": {n: dict(t) for n, t in sorted(by_words.items())},
        "examples": examples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset_dir", type=Path)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--provider", default=None, help="embedding provider (default: configured)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.dataset_dir, args.queries, args.provider)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['dataset']}, {result['model']}: {args.queries} made-up queries")
    for words, tally in result["by_words"].items():
        print(f"{words} word(s): {tally.get('found', 0)} of {tally['queries']} found rows "
              f"({tally.get('corrected', 0)} by a correction, "
              f"{tally.get('vector_only', 0)} by meaning alone)")  # fmt: skip
    for example in result["examples"]:
        print(f"  {example['query']!r}: corrected {example['corrections']}, first "
              f"{example['first']!r}")  # fmt: skip


if __name__ == "__main__":
    main()
