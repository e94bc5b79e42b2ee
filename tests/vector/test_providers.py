"""Providers: the fake's determinism, vector checks, the registry, and OpenAI over HTTP."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from subspace.config import Settings
from subspace.errors import ConfigError
from subspace.providers import registry
from subspace.providers.base import EMBEDDING_DIMENSIONS, ProviderError, checked_vectors
from subspace.providers.fake import FakeProvider, trigram_vector
from subspace.providers.openai import MAX_INPUT_CHARS, OpenAIProvider
from tests.openai_stub import Stub, running_stub


def test_fake_vectors_are_the_same_in_another_process() -> None:
    here = trigram_vector("Reciprocal rank fusion, k = 60").tolist()
    code = (
        "from subspace.providers.fake import trigram_vector as t;"
        "print(t('Reciprocal rank fusion, k = 60').tolist())"
    )
    there = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert np.allclose(eval(there), here)


@pytest.mark.parametrize("text", ["", " ", "a", "!!", "日本", "\u200b"])
def test_fake_never_returns_a_zero_vector(text: str) -> None:
    vector = trigram_vector(text)
    assert vector.shape == (256,)
    assert np.isclose(np.linalg.norm(vector), 1.0)


def test_fake_similar_spelling_is_closer() -> None:
    a, b, c = (trigram_vector(t) for t in ("biomaterials", "biomateirals", "sourdough"))
    assert float(a @ b) > 0.5 > float(a @ c)


def test_checked_vectors_pad_and_normalise() -> None:
    out = checked_vectors([[3.0, 4.0]], count=1, model="m", dimensions=2)
    assert out.shape == (1, EMBEDDING_DIMENSIONS)
    assert np.allclose(out[0, :2], [0.6, 0.8])
    assert not out[0, 2:].any()


@pytest.mark.parametrize(
    ("vectors", "dimensions", "message"),
    [
        ([[1.0] * 768], 1536, "expected 1536 dimensions, got 768 from model 'm'"),
        ([[1.0] * 3072], 3072, "at most 1536 fit"),
        ([[1.0, float("nan")]], 2, "non-finite"),
        ([[0.0, 0.0]], 2, "all-zero"),
        ([[1.0, 1.0]] * 2, 2, "expected 1 vectors, got 2"),
    ],
)
def test_checked_vectors_reject(vectors: list[list[float]], dimensions: int, message: str) -> None:
    with pytest.raises(ProviderError, match=message) as caught:
        checked_vectors(vectors, count=1, model="m", dimensions=dimensions)
    assert caught.value.retryable is False


def test_registry_resolution(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    assert registry.provider_name(Settings(providers="fake", openai_api_key="k")) == "fake"
    assert registry.provider_name(Settings(openai_api_key="sk-x")) == "openai"
    # A fresh install: the bundled MiniLM on onnxruntime, whether torch is there or not.
    assert registry.provider_name(Settings()) == "onnx"
    monkeypatch.setattr(registry, "local_extra_installed", lambda: True)
    assert registry.provider_name(Settings()) == "onnx"
    assert registry.provider_name(Settings(local_model="/models/e5")) == "local"
    monkeypatch.setattr(registry, "onnx_installed", lambda: False)
    assert registry.provider_name(Settings()) == "local"
    monkeypatch.setattr(registry, "local_extra_installed", lambda: False)
    monkeypatch.setattr(registry, "_GIVEN", set())  # the notice is given once a process
    with caplog.at_level(logging.WARNING, logger="subspace.providers.registry"):
        assert registry.provider_name(Settings(home=tmp_path)) == "fake"
    assert "fake provider" in caplog.text
    with pytest.raises(ConfigError, match="Use one of: fake, openai, local"):
        registry.provider_name(Settings(providers="cohere"))
    with caplog.at_level(logging.INFO, logger="subspace.providers.registry"):
        provider = registry.create_provider(Settings(providers="fake"))
    assert provider.model == "fake-trigram-256"
    assert "embedding provider: fake (model fake-trigram-256)" in caplog.text


def test_debounce_defaults_follow_the_provider() -> None:
    assert registry.index_debounce_ms(Settings(), FakeProvider()) == 0
    slow = type("Slow", (), {"name": "openai"})()
    assert registry.index_debounce_ms(Settings(), slow) == 1500
    assert registry.index_debounce_ms(Settings(index_debounce_ms=20), slow) == 20


@pytest.fixture
def stub() -> Iterator[Stub]:
    with running_stub() as running:
        yield running


def provider_for(
    stub: Stub, sleeps: list[float] | None = None, timeout_s: float = 5
) -> OpenAIProvider:
    record = sleeps.append if sleeps is not None else (lambda _: None)
    return OpenAIProvider("sk-test", stub.url, timeout_s=timeout_s, sleep=record)


def test_openai_embeds_in_order_and_in_batches(stub: Stub) -> None:
    texts = [f"text number {i}" for i in range(300)] + ["x" * (MAX_INPUT_CHARS + 500)]
    vectors = provider_for(stub).embed(texts)
    assert len(vectors) == 301
    assert len(vectors[0]) == 1536
    assert np.allclose(vectors[5][:256], trigram_vector("text number 5"))
    assert [len(r["input"]) for r in stub.requests] == [256, 45]
    assert len(stub.requests[1]["input"][-1]) == MAX_INPUT_CHARS
    assert stub.requests[0]["model"] == "text-embedding-3-small"


def test_openai_honours_retry_after_on_429(stub: Stub) -> None:
    stub.script = [{"kind": "status", "code": 429, "headers": {"retry-after": "3"}}]
    sleeps: list[float] = []
    assert len(provider_for(stub, sleeps).embed(["a"])) == 1
    assert sleeps == [3.0]
    assert len(stub.requests) == 2


def test_openai_backs_off_on_5xx_then_gives_up(stub: Stub) -> None:
    stub.script = [{"kind": "status", "code": 503}] * 4
    sleeps: list[float] = []
    with pytest.raises(ProviderError, match="after 4 attempts") as caught:
        provider_for(stub, sleeps).embed(["a"])
    assert caught.value.retryable
    assert len(stub.requests) == 4
    assert len(sleeps) == 3
    assert sleeps[0] < sleeps[2]


def test_openai_does_not_retry_401(stub: Stub) -> None:
    stub.script = [{"kind": "status", "code": 401, "message": "bad key"}]
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as caught:
        provider_for(stub).embed(["a"])
    assert not caught.value.retryable
    assert len(stub.requests) == 1


def test_openai_shortens_inputs_once_when_the_context_is_too_long(stub: Stub) -> None:
    stub.script = [
        {"kind": "status", "code": 400, "message": "This model's maximum context length is 8192"}
    ]
    provider_for(stub).embed(["y" * 20_000])
    assert [len(r["input"][0]) for r in stub.requests] == [20_000, 8_000]
    stub.script = [{"kind": "status", "code": 400, "message": "invalid input"}]
    with pytest.raises(ProviderError, match="rejected") as caught:
        provider_for(stub).embed(["z"])
    assert not caught.value.retryable


def test_openai_times_out_and_retries(stub: Stub) -> None:
    stub.script = [{"kind": "sleep", "seconds": 1.0}] * 4
    with pytest.raises(ProviderError, match="after 4 attempts"):
        provider_for(stub, [], timeout_s=0.2).embed(["slow"])


def test_openai_needs_a_key() -> None:
    with pytest.raises(ProviderError, match="OPENAI_API_KEY is not set"):
        OpenAIProvider("")


def test_the_onnx_model_embeds_by_meaning_offline_and_in_any_order() -> None:
    """all-MiniLM-L6-v2 on onnxruntime: unit vectors of 384 dimensions, a paraphrase nearer
    than a stranger, the same vector for a text alone or in a batch of others, and a text
    longer than the model's window cut rather than refused."""
    from subspace.providers.onnx import OnnxProvider

    provider = OnnxProvider()
    texts = [
        "The ferry leaves the harbour at nine.",
        "A boat departs from the port at 9 am.",
        "Quarterly revenue grew by four percent.",
        "tern " * 2_000,
    ]
    vectors = provider.embed(texts)
    assert vectors.shape == (4, 384) and provider.model == "onnx:all-MiniLM-L6-v2-int8"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    near, far = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert near > 0.6 > far, (near, far)
    alone = provider.embed([texts[1]])[0]
    assert float(alone @ vectors[1]) > 0.9999
