"""The deterministic fake provider: hashed character trigrams, for tests and sandboxes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from subspace.providers.base import Vectors

LIVE_DIMENSIONS = 256
MODEL = "fake-trigram-256"
# Fixed odd multipliers for a multiplicative hash of three code points; the same on every
# platform and in every process (Python's own hash() is salted per process).
_M1, _M2, _M3 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B1)


def trigram_vector(text: str) -> Vectors:
    """A unit vector of `LIVE_DIMENSIONS` counting the hashed character trigrams of `text`.

    Lowercased and padded with a space on each side, so a word's edges count too. Text too
    short for a trigram falls back to hashing its characters, and empty text to a fixed
    vector, so no input yields the all-zero vector that breaks cosine distance.
    """
    padded = f" {' '.join(text.lower().split())} "
    codes = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    vector = np.zeros(LIVE_DIMENSIONS, dtype=np.float32)
    if codes.size >= 3:
        mixed = codes[:-2] * _M1 + codes[1:-1] * _M2 + codes[2:] * _M3
        buckets = ((mixed >> np.uint64(29)) ^ mixed) % np.uint64(LIVE_DIMENSIONS)
        np.add.at(vector, buckets.astype(np.int64), 1.0)
    if not vector.any():
        buckets = (codes * _M1 >> np.uint64(40)) % np.uint64(LIVE_DIMENSIONS)
        np.add.at(vector, buckets.astype(np.int64), 1.0)
    if not vector.any():
        vector[0] = 1.0
    return vector / np.float32(np.linalg.norm(vector))


class FakeProvider:
    """Embeddings without a model: similar spelling gives similar vectors."""

    name = "fake"
    model = MODEL
    dimensions = LIVE_DIMENSIONS

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, LIVE_DIMENSIONS), dtype=np.float32)
        return np.stack([trigram_vector(text) for text in texts])
