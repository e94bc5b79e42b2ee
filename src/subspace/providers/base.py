"""The embedding provider protocol, its errors, and the checks every vector passes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

EMBEDDING_DIMENSIONS = 1536  # the width of search.embeddings.vec; narrower models are padded

Vectors = npt.NDArray[np.float32]
EmbedResult = Sequence[Sequence[float]] | Vectors


class ProviderError(Exception):
    """An embedding call failed. `retryable` says whether trying again later may help;
    `reason` (refused, timeout or error), when known, says why, for degraded searches."""

    def __init__(self, message: str, *, retryable: bool = True, reason: str | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.reason = reason


class EmbeddingProvider(Protocol):
    """Turns texts into vectors of `dimensions` floats, tagged with `model`."""

    name: str
    model: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> EmbedResult: ...


def checked_vectors(vectors: EmbedResult, *, count: int, model: str, dimensions: int) -> Vectors:
    """`vectors` as a (count, 1536) float32 array of unit vectors, zero-padded, after
    checking each one.

    A vector must have the provider's declared width (at most 1536), be finite and not be
    all zero; anything else raises a non-retryable ProviderError naming the model.
    """
    if len(vectors) != count:
        raise ProviderError(
            f"expected {count} vectors, got {len(vectors)} from model {model!r}", retryable=False
        )
    if dimensions > EMBEDDING_DIMENSIONS:
        raise ProviderError(
            f"model {model!r} has {dimensions} dimensions; at most {EMBEDDING_DIMENSIONS} fit",
            retryable=False,
        )
    out = np.zeros((count, EMBEDDING_DIMENSIONS), dtype=np.float32)
    for index, vector in enumerate(vectors):
        array = np.asarray(vector, dtype=np.float64)
        if array.ndim != 1 or array.shape[0] != dimensions:
            raise ProviderError(
                f"expected {dimensions} dimensions, got {array.shape[-1] if array.ndim else 0} "
                f"from model {model!r}",
                retryable=False,
            )
        if not np.all(np.isfinite(array)):
            raise ProviderError(f"model {model!r} returned a non-finite value", retryable=False)
        if not np.any(array):
            raise ProviderError(f"model {model!r} returned an all-zero vector", retryable=False)
        # Unit length keeps every component inside half precision's range once stored.
        out[index, :dimensions] = array / np.linalg.norm(array)
    return out
