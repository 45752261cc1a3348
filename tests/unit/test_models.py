"""The model transport against the scripted OpenAI-compatible server; the rate limiter."""
# ruff: noqa: F811

from __future__ import annotations

import os
import ssl

import pytest

from python.helpers import models
from python.helpers.models import ChatModel, ModelConfig, ModelError, ThinkSplitter
from python.helpers.rate_limiter import RateLimiter, approx_tokens
from tests.support.model_server import ScriptedModel, model_server  # noqa: F401

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "hello"}]


def make_model(server: ScriptedModel, key: str | None = "sk-test-secret-key", **kw) -> ChatModel:
    config = ModelConfig(provider="other", name="scripted", api_base=server.url, **kw)
    model = ChatModel(config, key)
    model.retry_delay = 0.01
    return model


class Recorder:
    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    async def __call__(self, delta: str, full: str) -> None:
        self.calls.append((delta, full))


def test_providers_table():
    providers = models.load_providers()
    for pid in [
        "openai",
        "openrouter",
        "anthropic",
        "google",
        "groq",
        "mistral",
        "deepseek",
        "ollama",
        "lmstudio",
        "other",
    ]:
        entry = providers[pid]
        assert entry["id"] == pid and entry["name"]
        assert isinstance(entry["key_required"], bool)
        assert entry["api_base"].startswith("http") or pid == "other"
    assert providers["ollama"]["key_required"] is False
    assert providers["openai"]["key_required"] is True


def test_config_from_settings():
    from python.helpers.settings import DEFAULTS

    settings = dict(DEFAULTS, util_model_name="small", util_model_rl_requests=5)
    config = ModelConfig.from_settings(settings, "util_model")
    assert config.name == "small" and config.rl_requests == 5
    assert config.provider == DEFAULTS["util_model_provider"]
    assert ModelConfig.from_settings(settings, "chat_model").name == DEFAULTS["chat_model_name"]


async def test_streaming_with_native_reasoning(model_server):
    model_server.reply("The answer is 42.", reasoning="Let me think it over.", chunks=4)
    on_response, on_reasoning = Recorder(), Recorder()
    result = await make_model(model_server).call(
        MESSAGES, on_reasoning=on_reasoning, on_response=on_response
    )
    assert result.response == "The answer is 42."
    assert result.reasoning == "Let me think it over."
    assert len(on_response.calls) > 1
    assert on_response.calls[-1][1] == "The answer is 42."
    assert "".join(d for d, _ in on_response.calls) == "The answer is 42."
    assert on_reasoning.calls[-1][1] == "Let me think it over."
    request = model_server.requests[0]
    assert request["model"] == "scripted" and request["stream"] is True
    assert request["messages"] == MESSAGES


async def test_think_tags_split_across_chunks(model_server):
    model_server.reply('<think>step one, step two</think>{"tool_name": "response"}', chunks=9)
    on_response = Recorder()
    result = await make_model(model_server).call(MESSAGES, on_response=on_response)
    assert result.reasoning == "step one, step two"
    assert result.response == '{"tool_name": "response"}'
    assert all("<" not in d and ">" not in d for d, _ in on_response.calls)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_think_splitter_any_chunking(size):
    text = "pre <think>inner < thought</think> post <thi"
    splitter = ThinkSplitter()
    response = reasoning = ""
    for i in range(0, len(text), size):
        r, t = splitter.feed(text[i : i + size])
        response, reasoning = response + r, reasoning + t
    r, t = splitter.flush()
    assert (response + r, reasoning + t) == ("pre  post <thi", "inner < thought")


async def test_retries_before_first_chunk_then_succeeds(model_server):
    model_server.fail(500, times=2)
    model_server.reply("ok")
    result = await make_model(model_server).call(MESSAGES)
    assert result.response == "ok"
    assert model_server.calls == 3


async def test_gives_up_after_two_retries(model_server):
    model_server.fail(503, times=3)
    model_server.reply("never reached")
    with pytest.raises(ModelError) as info:
        await make_model(model_server).call(MESSAGES)
    assert info.value.status == 503 and info.value.code == "model_error"
    assert model_server.calls == 3


async def test_429_is_retried(model_server):
    model_server.fail(429)
    model_server.reply("fine")
    assert (await make_model(model_server).call(MESSAGES)).response == "fine"


async def test_no_retry_after_a_chunk(model_server):
    model_server.reply("partial answer that breaks", chunks=6, cut_after_chunks=3)
    model_server.reply("must not be used")
    on_response = Recorder()
    with pytest.raises(ModelError, match="after the stream began") as info:
        await make_model(model_server).call(MESSAGES, on_response=on_response)
    assert info.value.status is None
    assert model_server.calls == 1
    assert on_response.calls  # the chunk did arrive


async def test_401_is_final_and_masks_the_key(model_server):
    key = "sk-test-secret-key"
    model_server.fail(401, f"Incorrect API key provided: {key}")
    with pytest.raises(ModelError) as info:
        await make_model(model_server, key=key).call(MESSAGES)
    assert info.value.status == 401
    assert key not in str(info.value) and key not in str(info.value.to_dict())
    assert "§§secret(API_KEY)" in info.value.message
    assert model_server.calls == 1


async def test_comma_separated_keys_rotate(model_server):
    model_server.reply("a")
    model_server.reply("b")
    model_server.fail(401, "bad key k-two-secret")
    model = make_model(model_server, key="k-one-secret, k-two-secret")
    await model.call(MESSAGES)
    await model.call(MESSAGES)
    with pytest.raises(ModelError) as info:
        await model.call(MESSAGES)
    assert "k-two-secret" not in info.value.message
    used = [h.get("authorization") for h in model_server.headers]
    assert used[0] != used[1] and used[0] == used[2]
    assert {used[0], used[1]} == {"Bearer k-one-secret", "Bearer k-two-secret"}


async def test_missing_key_or_base_fails_before_network(model_server):
    config = ModelConfig(provider="openai", name="gpt", api_base=model_server.url)
    with pytest.raises(ModelError, match="API_KEY_OPENAI"):
        await ChatModel(config, None).call(MESSAGES)
    with pytest.raises(ModelError, match="api_base"):
        await ChatModel(ModelConfig(provider="other", name="x"), "k").call(MESSAGES)
    assert model_server.calls == 0


async def test_keyless_provider_sends_placeholder_key(model_server):
    model_server.reply("local")
    config = ModelConfig(provider="ollama", name="llama", api_base=model_server.url)
    assert (await ChatModel(config, None).call(MESSAGES)).response == "local"


async def test_kwargs_are_passed_but_cannot_override_the_call(model_server):
    model_server.reply("x")
    model = make_model(model_server, kwargs={"temperature": 0.2, "stream": False, "model": "y"})
    await model.call(MESSAGES)
    request = model_server.requests[0]
    assert request["temperature"] == 0.2
    assert request["stream"] is True and request["model"] == "scripted"


def test_construction_does_no_network():
    ChatModel(ModelConfig(provider="openai", name="gpt", api_base="http://127.0.0.1:9/v1"), "k")


# rate limiter -------------------------------------------------------------------------------
class FakeClock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_rate_limiter_requests_window():
    clock = FakeClock()
    limiter = RateLimiter(requests=2, clock=clock, sleep=clock.sleep)
    assert await limiter.acquire() == 0
    clock.now += 10
    assert await limiter.acquire() == 0
    assert limiter.usage() == (2, 0, 0)
    assert await limiter.acquire() == pytest.approx(50)  # until the first leaves the window
    assert clock.now == pytest.approx(1060)
    assert limiter.usage() == (2, 0, 0)


async def test_rate_limiter_input_and_output_tokens():
    clock = FakeClock()
    limiter = RateLimiter(input_tokens=100, output_tokens=50, clock=clock, sleep=clock.sleep)
    await limiter.acquire(60)
    assert limiter.wait_time(30) == 0
    assert limiter.wait_time(50) == pytest.approx(60)
    clock.now += 5
    limiter.add_output(50)
    # input would fit, but output is used up until the output entry expires
    clock.now += 56
    assert limiter.usage() == (0, 0, 50)
    assert limiter.wait_time(10) == pytest.approx(4)
    clock.now += 4
    assert limiter.wait_time(10) == 0


async def test_rate_limiter_admits_oversized_request_on_empty_window():
    clock = FakeClock()
    limiter = RateLimiter(input_tokens=10, clock=clock, sleep=clock.sleep)
    assert await limiter.acquire(500) == 0
    assert await limiter.acquire(500) == pytest.approx(60)


async def test_rate_limiter_unlimited_by_default():
    clock = FakeClock()
    limiter = RateLimiter(clock=clock, sleep=clock.sleep)
    for _ in range(100):
        await limiter.acquire(10_000)
    assert clock.sleeps == []


def test_approx_tokens():
    assert approx_tokens("") == 0
    assert approx_tokens("abcd") == 1
    assert approx_tokens("abcde") == 2


async def test_model_calls_go_through_the_limiter(model_server):
    model_server.reply("one")
    model = make_model(model_server, rl_requests=7)
    await model.call(MESSAGES)
    limiter = models.limiter_for(model.config)
    assert limiter.requests == 7
    assert limiter.usage()[0] >= 1


# upstream provider ids ------------------------------------------------------------------------
UPSTREAM_OPENAI_PROTOCOL = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "huggingface": "https://router.huggingface.co/v1",
    "venice": "https://api.venice.ai/api/v1",
    "sambanova": "https://api.sambanova.ai/v1",
    "moonshot": "https://api.moonshot.ai/v1",
    "cometapi": "https://api.cometapi.com/v1",
    "zai": "https://api.z.ai/api/paas/v4",
    "zai_coding": "https://api.z.ai/api/coding/paas/v4",
    "lm_studio": "http://127.0.0.1:1234/v1",
    "azure": "",
}


@pytest.mark.parametrize(("upstream_id", "base"), sorted(UPSTREAM_OPENAI_PROTOCOL.items()))
def test_upstream_provider_ids_resolve_with_their_default_base(upstream_id, base):
    _, entry = models.resolve_provider(upstream_id)
    assert entry, f"{upstream_id} is not a known provider"
    assert entry["api_base"] == base
    assert ChatModel(ModelConfig(provider=upstream_id, name="m"), "k").provider["name"]


def test_spellings_of_one_provider_are_the_same_provider():
    assert models.resolve_provider("lm_studio")[0] == "lmstudio"
    assert models.resolve_provider("LM-Studio")[0] == "lmstudio"
    assert models.resolve_provider("nope") == ("nope", {})


async def test_upstream_lm_studio_id_calls_its_endpoint_without_a_key(model_server):
    model_server.reply("from lm studio")
    config = ModelConfig(provider="lm_studio", name="local", api_base=model_server.url)
    assert (await ChatModel(config, None).call(MESSAGES)).response == "from lm studio"


async def test_azure_needs_its_resource_url_and_sends_the_key_header(model_server):
    with pytest.raises(ModelError, match="api_base"):
        await ChatModel(ModelConfig(provider="azure", name="gpt"), "az-key-1234").call(MESSAGES)
    model_server.reply("from azure")
    config = ModelConfig(provider="azure", name="gpt", api_base=model_server.url)
    assert (await ChatModel(config, "az-key-1234").call(MESSAGES)).response == "from azure"
    assert model_server.headers[-1]["api-key"] == "az-key-1234"
    assert model_server.headers[-1]["authorization"] == "Bearer az-key-1234"


def test_key_of_an_upstream_spelling_is_found_under_our_id(tmp_path):
    from python.helpers import settings

    env = {"API_KEY_LMSTUDIO": "lm-key-1"}
    assert settings.get_api_key("lm_studio", tmp_path, environ=env) == "lm-key-1"
    assert settings.get_api_key("lm_studio", tmp_path, environ={"API_KEY_LM_STUDIO": "k2"}) == "k2"


def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


def test_tls_context_is_built_once_per_process_and_verifies():
    first = models.tls_context("https://api.example.org/v1")
    assert first is models.tls_context("HTTPS://other.example.org/v1")
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    assert first.cert_store_stats()["x509_ca"] > 0  # the CA certificates httpx would load


def test_plain_http_endpoint_gets_a_verifying_context_without_certificates(monkeypatch):
    _no_proxies(monkeypatch)
    plain = models.tls_context("http://127.0.0.1:11434/v1")
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0  # any TLS through it would fail
    # with a proxy in the environment the client may speak TLS to it: the real context
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example.org:3128")
    assert models.tls_context("http://127.0.0.1:11434/v1") is models.tls_context("https://x/")


async def test_a_call_to_a_plain_http_endpoint_loads_no_certificates(model_server, monkeypatch):
    _no_proxies(monkeypatch)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("CA certificates loaded for a plain http:// endpoint")

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refuse)
    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", refuse)
    model_server.reply("plain")
    assert (await make_model(model_server).call(MESSAGES)).response == "plain"
