"""Deterministic texts for benchmarks, built from the SciFact abstracts."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared/datasets/scifact/corpus.jsonl"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


def abstracts(path: Path = DEFAULT_CORPUS) -> Iterator[tuple[str, str]]:
    """(title, text) of every abstract, in file order."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            yield doc["title"], doc["text"]


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text) if s.strip()]
