"""The embeddings transport: OpenAI-compatible ``POST <api_base>/embeddings``.

Every provider id the chat model accepts (conf/model_providers.yaml, its aliases and the
``api_base`` setting) reaches its embeddings endpoint the same way, with the same keys
(``API_KEY_<PROVIDER>``). Texts go in batches of ``batch_size``; each batch waits for the
model's rate limiter (``embed_model_rl_requests``, ``embed_model_rl_input``) and is retried on
408/429/5xx at most twice (asking again for an embedding changes nothing). With a cache
(``EmbeddingCache``, keyed by (model id, SHA-256 of the text)), a text embedded before costs
no request. Nothing touches the network at import or construction.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import httpx

from python.helpers.models import (
    MAX_RETRIES,
    RETRY_STATUSES,
    ModelClient,
    ModelConfig,
    ModelError,
    _error_text,
    limiter_for,
    tls_context,
)
from python.helpers.rate_limiter import approx_tokens

PREFIX = "embed_model"
BATCH_SIZE = 64
_RESERVED_KWARGS = {"model", "input", "encoding_format"}
_TIMEOUT = httpx.Timeout(120.0, connect=15.0)

Vector = list[float]


def text_digest(text: str) -> str:
    """The cache key of a text: SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache(Protocol):
    """Vectors already computed, by (model id, text digest)."""

    async def get_many(self, model: str, digests: Sequence[str]) -> dict[str, Vector]: ...

    async def put_many(self, model: str, vectors: Mapping[str, Vector]) -> None: ...


#: The model configuration searches and new memories must use instead of the settings'
#: while a re-embed runs (the old model), else None. Set by the process's memory service
#: (python/durable/memory_service.py); None when no service runs (a script, a test).
search_config_override: Callable[[], ModelConfig | None] | None = None


def search_config(settings: Mapping[str, Any]) -> ModelConfig:
    """The embedding model a query or a new memory is embedded with now: the old model
    while a re-embed moves memories to the settings' one, else the settings' model."""
    hook = search_config_override
    found = hook() if hook is not None else None
    return found if found is not None else embedding_config(settings)


def embedding_config(settings: Mapping[str, Any]) -> ModelConfig:
    """The embedding model's configuration from the flat ``embed_model_*`` settings."""
    return ModelConfig.from_settings(settings, PREFIX)


class EmbeddingModel(ModelClient):
    """Embeds texts with one provider's model; see the module docstring."""

    batch_size = BATCH_SIZE

    def __init__(
        self, config: ModelConfig, api_key: str | None, *, cache: EmbeddingCache | None = None
    ) -> None:
        super().__init__(config, api_key)
        self.cache = cache

    @property
    def model_id(self) -> str:
        """What stored vectors name as their model: ``<provider id>/<model name>``."""
        return f"{self.provider_id}/{self.config.name}"

    async def embed_query(self, text: str) -> Vector:
        return (await self.embed([text]))[0]

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        """One vector per text, in order; a cached text costs no request."""
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts")
        digests = [text_digest(t) for t in texts]
        found: dict[str, Vector] = {}
        if self.cache is not None and digests:
            found = dict(await self.cache.get_many(self.model_id, sorted(set(digests))))
        missing: dict[str, str] = {}
        for text, digest in zip(texts, digests, strict=True):
            if digest not in found:
                missing.setdefault(digest, text)
        if missing:
            base, _ = self._endpoint()  # a configuration error before anything is sent
            fresh: dict[str, Vector] = {}
            todo = list(missing.items())
            for start in range(0, len(todo), max(1, self.batch_size)):
                batch = todo[start : start + self.batch_size]
                vectors = await self._request(base, [text for _, text in batch])
                fresh.update(
                    (digest, vector) for (digest, _), vector in zip(batch, vectors, strict=True)
                )
            if self.cache is not None:
                await self.cache.put_many(self.model_id, fresh)
            found.update(fresh)
        return [found[d] for d in digests]

    async def _request(self, base: str, texts: list[str]) -> list[Vector]:
        limiter = limiter_for(self.config)
        kwargs = {k: v for k, v in self.config.kwargs.items() if k not in _RESERVED_KWARGS}
        body = {**kwargs, "model": self.config.name, "input": texts, "encoding_format": "float"}
        attempt = 0
        while True:
            await limiter.acquire(sum(approx_tokens(t) for t in texts))
            try:
                return await self._post(base, body, len(texts))
            except ModelError as error:
                if attempt >= MAX_RETRIES or error.status not in RETRY_STATUSES:
                    raise
                attempt += 1
                await asyncio.sleep(self.retry_delay * attempt)

    async def _post(self, base: str, body: dict, count: int) -> list[Vector]:
        _, key = self._endpoint()
        url = base.rstrip("/") + "/embeddings"
        try:
            async with httpx.AsyncClient(timeout=_TIMEOUT, verify=tls_context(base)) as client:
                response = await client.post(url, json=body, headers=self._headers(key))
            if response.status_code >= 400:
                status = response.status_code
                raise ModelError(
                    self._mask(
                        f"embedding call failed (HTTP {status}): {_error_text(response.text)}"
                    ),
                    status,
                )
            return _vectors(response.json(), count)
        except ModelError as error:
            raise ModelError(self._mask(error.message), error.status) from None
        except (httpx.HTTPError, OSError, ValueError) as exc:
            raise ModelError(
                self._mask(f"embedding call failed: {type(exc).__name__}: {exc}")
            ) from None


def _vectors(payload: Any, count: int) -> list[Vector]:
    """The ``count`` vectors of an OpenAI-style embeddings answer, in input order."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list) or len(data) != count:
        got = len(data) if isinstance(data, list) else "no"
        raise ModelError(f"embedding answer has {got} vectors for {count} texts")
    ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
    vectors: list[Vector] = []
    for item in ordered:
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(vector, list) or not vector:
            raise ModelError("embedding answer holds an item without a vector")
        values = [float(v) for v in vector]
        if not all(math.isfinite(v) for v in values):
            raise ModelError("embedding answer holds a value that is not a finite number")
        if vectors and len(values) != len(vectors[0]):
            raise ModelError("embedding answer mixes vector dimensions")
        vectors.append(values)
    return vectors
