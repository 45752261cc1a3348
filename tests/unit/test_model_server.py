"""The scripted model server speaks enough OpenAI for the real client."""
# ruff: noqa: F811

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time

import httpx
import openai
import pytest

from python.helpers.files import BASE_DIR
from tests.integration._helpers import wait_until
from tests.support.model_server import ScriptedFailure, ScriptedModel, model_server  # noqa: F401

pytestmark = pytest.mark.unit


def _client(server: ScriptedModel) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.url, api_key="test-key", max_retries=0)


async def _stream(server: ScriptedModel) -> tuple[str, str]:
    content, reasoning = "", ""
    async with _client(server) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        async for chunk in stream:
            delta = chunk.choices[0].delta
            content += delta.content or ""
            reasoning += getattr(delta, "reasoning_content", None) or ""
    return content, reasoning


async def test_streams_content_and_reasoning(model_server: ScriptedModel):
    model_server.reply("Hello there, world", reasoning="let me think", chunks=4)
    content, reasoning = await _stream(model_server)
    assert content == "Hello there, world"
    assert reasoning == "let me think"
    assert model_server.calls == 1
    assert model_server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]
    assert model_server.requests[0]["stream"] is True


async def test_non_streaming_completion(model_server: ScriptedModel):
    model_server.reply({"a": 1})
    async with _client(model_server) as client:
        done = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
    assert json.loads(done.choices[0].message.content) == {"a": 1}


async def test_tool_reply_is_agent_zero_json(model_server: ScriptedModel):
    model_server.tool("response", {"text": "done"}, headline="Answering")
    content, _ = await _stream(model_server)
    assert json.loads(content) == {
        "thoughts": ["..."],
        "headline": "Answering",
        "tool_name": "response",
        "tool_args": {"text": "done"},
    }


async def test_failures_then_exhausted(model_server: ScriptedModel):
    model_server.fail(429, "slow down", times=2)
    async with _client(model_server) as client:
        for _ in range(2):
            with pytest.raises(openai.RateLimitError):
                await client.chat.completions.create(model="m", messages=[])
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            await client.chat.completions.create(model="m", messages=[])
    assert model_server.calls == 3


async def test_respond_with_used_when_queue_empty(model_server: ScriptedModel):
    model_server.reply("queued")
    model_server.respond_with(lambda body: f"echo {body['messages'][-1]['content']}")
    assert (await _stream(model_server))[0] == "queued"
    assert (await _stream(model_server))[0] == "echo hi"
    model_server.respond_with(lambda body: ScriptedFailure(503, "down"))
    with pytest.raises(openai.InternalServerError):
        await _stream(model_server)


def test_cut_stream_breaks_the_connection(model_server: ScriptedModel):
    model_server.reply("abcdefghij", chunks=5, cut_after_chunks=2)
    body = {"model": "m", "messages": [], "stream": True}
    received = []
    with pytest.raises(httpx.RemoteProtocolError):  # noqa: SIM117
        with httpx.stream("POST", model_server.url + "/chat/completions", json=body) as resp:
            for line in resp.iter_lines():
                received.append(line)
    data = [line for line in received if line.startswith("data: ")]
    assert len(data) == 2
    assert "[DONE]" not in received


def test_models_endpoint_and_wait_deadline(model_server: ScriptedModel):
    resp = httpx.get(model_server.url + "/models")
    assert resp.status_code == 200
    assert resp.json()["data"][0]["id"]
    started = time.monotonic()
    with pytest.raises(AssertionError, match="expected 1"):
        model_server.wait_for_calls(1, timeout=0.2)
    assert time.monotonic() - started < 5


def test_separate_process_reads_script(tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"status": 502}) + "\n" + json.dumps({"content": "from file"}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.model_server", "--script", str(script)],
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY http://127.0.0.1:")
        url = line.split()[1]
        body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        assert httpx.post(url + "/chat/completions", json=body).status_code == 502
        done = httpx.post(url + "/chat/completions", json=body).json()
        assert done["choices"][0]["message"]["content"] == "from file"
        httpx.post(url.removesuffix("/v1") + "/_script/queue", json={"content": "more"})
        done = httpx.post(url + "/chat/completions", json=body).json()
        assert done["choices"][0]["message"]["content"] == "more"
        seen = httpx.get(url.removesuffix("/v1") + "/_script/requests").json()["requests"]
        assert len(seen) == 3
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        proc.stdout.close()


def test_a_client_that_resets_its_connection_is_not_a_traceback(model_server, capfd):
    """A server under test killed mid-request resets its connection; the scripted model
    counts it instead of printing socketserver's traceback."""
    host, port = model_server.url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # unfinished
        # close with RST instead of FIN, as the kernel does for a killed process's socket
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    wait_until(lambda: model_server.dropped_connections == 1, 10, "the dropped connection")
    assert "Traceback" not in capfd.readouterr().err


def test_a_failing_responder_is_still_a_traceback(model_server, capfd):
    def broken(body: dict) -> str:
        raise RuntimeError("responder bug")

    model_server.respond_with(broken)
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"{model_server.url}/chat/completions", json={"messages": []}, timeout=10)
    err = capfd.readouterr().err
    assert "Traceback" in err and "RuntimeError: responder bug" in err
    assert model_server.dropped_connections == 0


# embeddings ----------------------------------------------------------------------------
def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_embeddings_are_deterministic_unit_vectors_recorded(model_server):
    model_server.embedding_dim = 32
    async with _client(model_server) as client:
        first = await client.embeddings.create(
            model="e", input=["the cat sat", "a dog ran"], encoding_format="float"
        )
        again = await client.embeddings.create(model="e", input="the cat sat")  # base64
    a, b = (item.embedding for item in first.data)
    assert len(a) == 32 and abs(_cosine(a, a) - 1) < 1e-9
    assert again.data[0].embedding == pytest.approx(a, abs=1e-6)
    assert _cosine(a, b) < 0.9  # different texts, different vectors
    assert model_server.embedded_texts == ["the cat sat", "a dog ran", "the cat sat"]
    assert [r["model"] for r in model_server.embedding_requests] == ["e", "e"]
    assert model_server.calls == 0  # the chat endpoint saw nothing


def test_embeddings_share_words_and_honour_dimensions(model_server):
    from tests.support.model_server import scripted_vector

    cat = scripted_vector("my cat likes fish", 64)
    assert _cosine(cat, scripted_vector("Cat fish", 64)) > _cosine(cat, scripted_vector("tax", 64))
    body = {"model": "e", "input": ["x"], "dimensions": 8}
    answer = httpx.post(model_server.url + "/embeddings", json=body).json()
    assert len(answer["data"][0]["embedding"]) == 8


def test_embeddings_scripted_failure_and_bad_input(model_server):
    model_server.fail_embeddings(429, "slow down")
    first = httpx.post(model_server.url + "/embeddings", json={"model": "e", "input": "x"})
    assert first.status_code == 429 and first.json()["error"]["message"] == "slow down"
    bad = httpx.post(model_server.url + "/embeddings", json={"model": "e", "input": [1]})
    assert bad.status_code == 400
    ok = httpx.post(model_server.url + "/embeddings", json={"model": "e", "input": "x"})
    assert ok.status_code == 200
    seen = httpx.get(model_server.url.removesuffix("/v1") + "/_script/embedding_requests")
    assert len(seen.json()["requests"]) == 3
