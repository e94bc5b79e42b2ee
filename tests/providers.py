"""Providers for tests: real fakes that count, fail or misbehave on purpose."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from subspace.providers.base import EmbedResult, ProviderError
from subspace.providers.fake import FakeProvider


class CountingProvider(FakeProvider):
    """The fake provider, remembering every batch of texts it was asked to embed."""

    def __init__(self, model: str = FakeProvider.model) -> None:
        self.model = model
        self.calls: list[list[str]] = []

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        self.calls.append(list(texts))
        return super().embed(texts)


class FailingProvider(CountingProvider):
    """Fails every batch that holds a text for which `fails` is true."""

    def __init__(self, fails: Callable[[str], bool], *, retryable: bool = True) -> None:
        super().__init__()
        self.fails = fails
        self.retryable = retryable

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        self.calls.append(list(texts))
        if any(self.fails(t) for t in texts):
            raise ProviderError("provider is down", retryable=self.retryable)
        return FakeProvider.embed(self, texts)


class BrokenVectorsProvider(CountingProvider):
    """Returns vectors of the wrong width, or with NaN in them."""

    def __init__(self, *, width: int = 256, nan: bool = False) -> None:
        super().__init__()
        self.width = width
        self.nan = nan

    def embed(self, texts: Sequence[str]) -> EmbedResult:
        self.calls.append(list(texts))
        vectors = np.ones((len(texts), self.width), dtype=np.float32)
        if self.nan:
            vectors[:, 0] = np.nan
        return vectors
