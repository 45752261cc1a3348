"""What is knowable about a model before anything is sent (#23): the configuration checks,
the connection probe, and a connection refused inside the call (tried again, then
``model_not_configured`` with ``sent=False``)."""
# ruff: noqa: F811

from __future__ import annotations

import pytest

from python.helpers import model_preflight
from python.helpers.models import ChatModel, ModelConfig, ModelNotConfigured
from tests.support.model_server import ScriptedModel, model_server  # noqa: F401
from tests.support.ui_server import free_port

pytestmark = pytest.mark.unit


def _problem(has_key: bool = True, **fields) -> str | None:
    config = ModelConfig(**{"provider": "openai", "name": "gpt", **fields})
    found = model_preflight.problem(config, has_key)
    return None if found is None else found.reason


def test_each_configuration_problem_is_named():
    assert _problem() is None
    assert _problem(has_key=False) == "no_api_key"
    assert _problem(provider="no-such") == "unknown_provider"
    assert _problem(provider="no-such", api_base="http://10.0.0.1:8000/v1") is None
    assert _problem(provider="azure") == "no_api_base"
    assert _problem(api_base="localhost:1234/v1") == "malformed_api_base"
    assert _problem(api_base="ftp://host/v1") == "malformed_api_base"
    assert _problem(api_base="http://host:99999/v1") == "malformed_api_base"
    assert _problem(name=" ") == "no_model_name"
    assert _problem(provider="ollama", has_key=False) is None  # no key needed
    found = model_preflight.problem(ModelConfig("openai", "gpt"), False, "utility")
    assert found is not None and found.setting == "API_KEY_OPENAI" and found.kind == "utility"
    assert "usr/.env" in found.message


def _model(base: str, key: str | None = "sk-x") -> ChatModel:
    model = ChatModel(ModelConfig(provider="other", name="m", api_base=base), key)
    model.connect_delay = 0.01
    model.retry_delay = 0.01
    return model


async def test_the_probe_refuses_a_closed_port_and_passes_a_listening_one(
    model_server: ScriptedModel,
):
    model_preflight.forget_reached()
    with pytest.raises(ModelNotConfigured) as info:
        await model_preflight.check(_model(f"http://127.0.0.1:{free_port()}/v1"))
    assert info.value.reason == "connection_refused"
    assert info.value.sent is False
    await model_preflight.check(_model(model_server.url))
    assert model_server.calls == 0  # a TCP connection, no request


async def test_a_refused_connection_inside_the_call_is_retried_then_not_configured():
    model = _model(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(ModelNotConfigured) as info:
        await model.call([{"role": "user", "content": "hi"}])
    assert info.value.reason == "connection_refused"
    assert info.value.sent is False
