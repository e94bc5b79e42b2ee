"""The OpenAI provider: text-embedding-3-small, or any OpenAI-compatible server."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence

from subspace.providers.base import ProviderError
from subspace.providers.breaker import failure_reason
from subspace.providers.retry import backoff, retry_after

log = logging.getLogger(__name__)

MODEL = "text-embedding-3-small"
DIMENSIONS = 1536
# The model reads at most 8,191 tokens. Without the tokenizer at hand (it is downloaded at run
# time), inputs are cut by characters: 24,000 covers English at ~4 chars/token, and a request
# the server still finds too long is retried once with inputs cut to 8,000.
MAX_INPUT_CHARS = 24_000
FALLBACK_INPUT_CHARS = 8_000
MAX_BATCH_INPUTS = 256  # the API accepts 2,048; smaller batches fail and retry cheaper
MAX_BATCH_CHARS = 400_000  # keeps a request well under the API's 300,000-token limit
MAX_ATTEMPTS = 4


def batches(texts: Sequence[str]) -> Iterator[list[str]]:
    """Split `texts` into requests under the input-count and size limits, in order."""
    batch: list[str] = []
    size = 0
    for text in texts:
        if batch and (len(batch) >= MAX_BATCH_INPUTS or size + len(text) > MAX_BATCH_CHARS):
            yield batch
            batch, size = [], 0
        batch.append(text)
        size += len(text)
    if batch:
        yield batch


class OpenAIProvider:
    """Embeddings over the OpenAI API with short timeouts and bounded retries.

    429 and 5xx back off and retry (honouring Retry-After); 400 and 401 fail at once.
    """

    name = "openai"
    model = MODEL
    dimensions = DIMENSIONS

    def __init__(
        self,
        api_key: str,
        base_url: str = "",
        *,
        timeout_s: float = 20.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from openai import OpenAI

        if not api_key:
            raise ProviderError(
                "OPENAI_API_KEY is not set. Set it, or run with PROVIDERS=fake.", retryable=False
            )
        # Retries are ours, so Retry-After and the attempt budget are handled in one place.
        self._client = OpenAI(
            api_key=api_key, base_url=base_url or None, timeout=timeout_s, max_retries=0
        )
        self._sleep = sleep

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch in batches([t[:MAX_INPUT_CHARS] or " " for t in texts]):
            vectors.extend(self._embed_batch(batch))
        return vectors

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        import openai

        shortened = False
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                response = self._client.embeddings.create(model=self.model, input=batch)
                ordered = sorted(response.data, key=lambda item: item.index)
                return [list(item.embedding) for item in ordered]
            except openai.BadRequestError as exc:
                if not shortened and "maximum context length" in str(exc).lower():
                    batch = [text[:FALLBACK_INPUT_CHARS] for text in batch]
                    shortened = True
                    continue
                raise ProviderError(f"openai rejected the request: {exc}", retryable=False) from exc
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise ProviderError(
                    "OpenAI refused the API key (401/403). Check OPENAI_API_KEY.", retryable=False
                ) from exc
            except openai.RateLimitError as exc:
                error: Exception = exc
                delay = retry_after(exc) or backoff(attempt)
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    raise ProviderError(
                        f"openai answered {exc.status_code}: {exc}", retryable=False
                    ) from exc
                error, delay = exc, backoff(attempt)
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                if failure_reason(exc) == "refused":
                    # Nothing listens at the address: backing off within this call only
                    # delays the failure (the indexer retries the event later anyway).
                    raise ProviderError(
                        f"openai refused the connection: {exc}", reason="refused"
                    ) from exc
                error, delay = exc, backoff(attempt)
            if attempt == MAX_ATTEMPTS:
                break
            log.warning("embedding call failed (%s); retrying in %.1f s", error, delay)
            self._sleep(delay)
        raise ProviderError(
            f"openai failed after {MAX_ATTEMPTS} attempts: {error}", reason=failure_reason(error)
        )
