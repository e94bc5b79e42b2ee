"""Where to put a model's similarity floor: how similar judged pairs, random pairs and
gibberish are, under one embedding model, on a BEIR collection.

A row only the vector leg found is shown when its cosine similarity to the query reaches the
model's floor (search/similarity.py). This measures, for the collection's queries:

- relevant: each query against each document judged relevant to it;
- random: each query against RANDOM_PAIRS documents drawn at random (nearly all unrelated);
- top1 of gibberish: the nearest document to each of GIBBERISH strings of random letters
  shaped like words, which should find nothing.

and prints their percentiles and, for a range of floors, the share of each kept. Vectors are
cached in SUBSPACE_HOME/eval-cache as `subspace eval` caches them, so a second run (and an
eval after it) embeds nothing.

    python bench/similarity_floor.py DATASET_DIR [--provider fake|local|onnx|openai] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from subspace.config import Settings
from subspace.evaluation.beir import load_collection
from subspace.evaluation.runner import CachingProvider
from subspace.providers.registry import create_provider

RANDOM_PAIRS = 20  # random documents per query
GIBBERISH = 300
SEED = 25
FLOORS = tuple(round(0.05 * i, 2) for i in range(1, 19))
PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)


def gibberish(rng: random.Random) -> str:
    """Two to four runs of random letters, 4 to 9 long: what a stray keystroke burst types."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(4))
    return " ".join(list(words)[: rng.randint(2, 4)])


def unit(vectors: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def measure(dataset: Path, provider_name: str | None) -> dict[str, Any]:
    settings = Settings.from_env()
    collection = load_collection(dataset)
    provider = CachingProvider(
        create_provider(settings, provider_name), settings.home / "eval-cache"
    )
    doc_ids = list(collection.corpus)
    # As the evaluation imports them: the title, then the text, as one bullet.
    texts = [
        " ".join(f"{title.strip()}. {text}".split()) if title.strip() else " ".join(text.split())
        for title, text in (collection.corpus[d] for d in doc_ids)
    ]
    docs = unit(np.asarray(provider.embed(texts), dtype=np.float32))
    query_ids = list(collection.queries)
    queries = unit(np.asarray(provider.embed([collection.queries[q] for q in query_ids])))
    rng = random.Random(SEED)
    noise = [gibberish(rng) for _ in range(GIBBERISH)]
    noise_vectors = unit(np.asarray(provider.embed(noise), dtype=np.float32))
    provider.save()
    index = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    relevant, unrelated = [], []
    for row, qid in enumerate(query_ids):
        judged = [
            index[d] for d, score in collection.qrels[qid].items() if score > 0 and d in index
        ]
        relevant += [float(queries[row] @ docs[i]) for i in judged]
        drawn = rng.sample(range(len(doc_ids)), RANDOM_PAIRS)
        unrelated += [float(queries[row] @ docs[i]) for i in drawn if i not in judged]
    top1 = (noise_vectors @ docs.T).max(axis=1).astype(float).tolist()
    groups = {"relevant": relevant, "random": unrelated, "gibberish_top1": top1}
    return {
        "dataset": collection.name,
        "provider": provider.name,
        "model": provider.model,
        "pairs": {name: len(values) for name, values in groups.items()},
        "percentiles": {
            name: {p: round(float(np.percentile(values, p)), 3) for p in PERCENTILES}
            for name, values in groups.items()
        },
        "kept_at_floor": {
            floor: {
                name: round(sum(v >= floor for v in values) / len(values), 3)
                for name, values in groups.items()
            }
            for floor in FLOORS
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--provider", choices=("fake", "local", "onnx", "openai"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.dataset, args.provider)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['dataset']}, {report['provider']} ({report['model']}): {report['pairs']}")
    print("percentile " + " ".join(f"{p:>6}" for p in PERCENTILES))
    for name, values in report["percentiles"].items():
        print(f"{name:<14}" + " ".join(f"{values[p]:>6.3f}" for p in PERCENTILES))
    print("\nfloor  kept: relevant  random  gibberish top-1")
    for floor, kept in report["kept_at_floor"].items():
        print(
            f"{floor:>5.2f}        {kept['relevant']:>6.3f}  {kept['random']:>6.3f}"
            f"  {kept['gibberish_top1']:>6.3f}"
        )


if __name__ == "__main__":
    main()
