"""The embeddings transport against the scripted /v1/embeddings endpoint."""
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from python.helpers import models, settings
from python.helpers.embeddings import (
    EmbeddingModel,
    Vector,
    embedding_config,
    text_digest,
)
from python.helpers.models import ModelConfig, ModelError
from tests.support.model_server import ScriptedModel, model_server, scripted_vector  # noqa: F401

pytestmark = pytest.mark.unit

KEY = "sk-embed-secret-key"


def make(server: ScriptedModel, key: str | None = KEY, **kw) -> EmbeddingModel:
    config = ModelConfig(provider="other", name="embedder", api_base=server.url, **kw)
    model = EmbeddingModel(config, key)
    model.retry_delay = 0.01
    return model


class DictCache:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Vector] = {}

    async def get_many(self, model: str, digests: Sequence[str]) -> dict[str, Vector]:
        return {d: self.rows[(model, d)] for d in digests if (model, d) in self.rows}

    async def put_many(self, model: str, vectors: Mapping[str, Vector]) -> None:
        self.rows.update(((model, d), v) for d, v in vectors.items())


async def test_embeds_in_order_with_the_key_and_model(model_server):
    vectors = await make(model_server).embed(["alpha beta", "gamma"])
    assert vectors[0] == pytest.approx(scripted_vector("alpha beta"))
    assert vectors[1] == pytest.approx(scripted_vector("gamma"))
    body = model_server.embedding_requests[0]
    assert body == {
        "model": "embedder",
        "input": ["alpha beta", "gamma"],
        "encoding_format": "float",
    }


async def test_batches_and_kwargs(model_server):
    model = make(model_server, kwargs={"dimensions": 16, "model": "ignored"})
    model.batch_size = 2
    vectors = await model.embed([f"text {i}" for i in range(5)])
    assert [len(v) for v in vectors] == [16] * 5
    assert [len(r["input"]) for r in model_server.embedding_requests] == [2, 2, 1]
    assert {r["model"] for r in model_server.embedding_requests} == {"embedder"}


async def test_cache_makes_a_known_text_free(model_server):
    cache = DictCache()
    model = make(model_server)
    model.cache = cache
    first = await model.embed(["one", "two", "one"])
    assert model_server.embedded_texts == ["one", "two"]  # duplicates asked once
    again = await model.embed(["two", "one"])
    assert again == [first[1], first[0]]
    assert model_server.embedded_texts == ["one", "two"]  # nothing new was asked
    await model.embed(["three", "one"])
    assert model_server.embedded_texts == ["one", "two", "three"]
    assert (model.model_id, text_digest("three")) in cache.rows


async def test_retries_429_then_gives_up_on_400(model_server):
    model_server.fail_embeddings(429)
    assert len(await make(model_server).embed(["x"])) == 1
    model_server.fail_embeddings(400, f"bad key {KEY}")
    with pytest.raises(ModelError) as info:
        await make(model_server).embed(["y"])
    assert info.value.status == 400 and KEY not in info.value.message
    assert len(model_server.embedding_requests) == 3


async def test_rate_limit_counts_requests(model_server):
    model = make(model_server, rl_requests=5, rl_input=1000)
    model.batch_size = 1
    await model.embed(["a", "b", "c"])
    requests, tokens, _ = models.limiter_for(model.config).usage()
    assert requests == 3 and tokens == 3


async def test_configuration_errors_send_nothing(model_server):
    with pytest.raises(ModelError, match="no API base URL"):
        await EmbeddingModel(ModelConfig(provider="nowhere", name="e"), "k").embed(["x"])
    with pytest.raises(ModelError, match="API_KEY_OPENAI"):
        await EmbeddingModel(ModelConfig(provider="openai", name="e"), None).embed(["x"])
    assert model_server.embedding_requests == []


async def test_a_short_answer_is_an_error(model_server):
    model_server.embedding_dim = 4
    model = make(model_server)
    original = model._post

    async def drop_one(base, body, count):
        return await original(base, {**body, "input": body["input"][:1]}, count)

    model._post = drop_one  # type: ignore[method-assign]
    with pytest.raises(ModelError, match="1 vectors for 2 texts"):
        await model.embed(["a", "b"])


def test_settings_defaults_are_upstreams():
    config = embedding_config(settings.DEFAULTS)
    assert (config.provider, config.name) == (
        "huggingface",
        "sentence-transformers/all-MiniLM-L6-v2",
    )
    assert (config.api_base, config.kwargs, config.rl_requests, config.rl_input) == ("", {}, 0, 0)
    # every provider id the chat model accepts, with its aliases
    model = EmbeddingModel(ModelConfig(provider="LM-Studio", name="m"), None)
    assert model.provider_id == "lmstudio" and model.model_id == "lmstudio/m"


def test_search_config_follows_the_memory_services_override(monkeypatch):
    """While a re-embed runs, the memory tools embed with the model search still uses
    (the memory service's override); otherwise with the settings' model."""
    from python.helpers import embeddings

    settings = {"embed_model_provider": "openai", "embed_model_name": "new-model"}
    assert embeddings.search_config(settings).name == "new-model"
    old = embeddings.embedding_config({**settings, "embed_model_name": "old-model"})
    monkeypatch.setattr(embeddings, "search_config_override", lambda: old)
    assert embeddings.search_config(settings).name == "old-model"
    monkeypatch.setattr(embeddings, "search_config_override", lambda: None)
    assert embeddings.search_config(settings).name == "new-model"
