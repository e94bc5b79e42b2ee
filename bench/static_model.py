"""A static embedding model beside the default MiniLM: WordLlama (256 dimensions, the weights
in its PyPI package, loaded offline), measured as `subspace eval` measures a provider, on a
BEIR collection or a judged workspace, with its texts-a-second.

WordLlama is not a provider of Subspace: this script wraps it for the evaluation alone, to
see whether its speed would be worth its quality as a fast mode for very large imports.

    python bench/static_model.py DATASET_DIR [--home DIR] [--sweep] [--json]

(wordllama comes with the [bench] and [dev] extras.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.corpus import DEFAULT_CORPUS, abstracts
from subspace.config import Settings
from subspace.evaluation.runner import CachingProvider, read_dataset, run_eval

MODEL = "wordllama:l2_supercat-256"


class WordLlamaProvider:
    """WordLlama's l2_supercat vectors at 256 dimensions, normalised."""

    name = "wordllama"
    model = MODEL
    dimensions = 256

    def __init__(self) -> None:
        import wordllama
        from wordllama import WordLlama

        # The package holds its weights and tokenizer, but 0.4 looks for the tokenizer in a
        # folder named `tokenizer` and ships it in `tokenizers`: its cache layout finds both.
        package = Path(wordllama.__file__).parent
        self._model: Any = WordLlama.load(
            dim=self.dimensions, cache_dir=package, disable_download=True
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        return np.asarray(self._model.embed(list(texts), norm=True), dtype=np.float32)


def texts_per_second(provider: WordLlamaProvider, count: int = 2000) -> float:
    """On ~1,000-character chunks of SciFact (or repeated titles when it is absent)."""
    if DEFAULT_CORPUS.exists():
        docs = itertools.islice(abstracts(DEFAULT_CORPUS), count)
        texts = [f"{title} {text}"[:1000] for title, text in docs]
    else:
        texts = ["a paragraph of text about embeddings and search " * 20] * count
    started = time.perf_counter()
    provider.embed(texts)
    return len(texts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", type=Path, help="a BEIR collection or a judged workspace")
    parser.add_argument("--home", type=Path, default=Path(".subspace-static"))
    parser.add_argument("--sweep", action="store_true", help="also try vector-leg weights")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # the embedded server's start is not news
    settings = Settings(home=args.home, providers="fake", index_sweep_s=0)
    inner = WordLlamaProvider()
    rate = texts_per_second(inner)
    provider = CachingProvider(inner, settings.home / "eval-cache")  # type: ignore[arg-type]
    report = run_eval(settings, read_dataset(args.dataset), provider, sweep=args.sweep)
    figures = report.as_json() | {"chunks_per_second": round(rate, 1)}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{report.dataset}, {MODEL}: {rate:,.0f} ~1,000-character chunks a second")
    for arm, scores in report.arms.items():
        print(f"{arm}: " + ", ".join(f"{m} {scores[m]:.4f}" for m in report.metrics))


if __name__ == "__main__":
    main()
