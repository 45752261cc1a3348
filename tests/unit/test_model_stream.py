"""The transport's reading of a server-sent event stream (httpx + httpx-sse), against a
real HTTP server that answers with a fixed body (what the scripted model server never sends)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from python.helpers.models import ChatModel, ModelConfig, ModelError

pytestmark = pytest.mark.unit

MESSAGES = [{"role": "user", "content": "hello"}]
KEY = "sk-stream-secret-key"
ROOT = Path(__file__).resolve().parents[2]


def chunk(**delta: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta}]})


class FixedServer:
    """Answers every POST with ``status`` and ``body``; records the requests."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.content_type = "text/event-stream"
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length)))
                self.send_response(owner.status)
                self.send_header("Content-Type", owner.content_type)
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def fixed() -> Iterator[FixedServer]:
    server = FixedServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def model(server: FixedServer) -> ChatModel:
    config = ModelConfig(provider="other", name="m", api_base=server.url + "/")
    chat = ChatModel(config, KEY)
    chat.retry_delay = 0.01
    return chat


async def test_events_with_comments_and_multiline_data(fixed):
    fixed.body = (
        ": keep-alive comment\n\n"
        f"event: message\ndata: {chunk(reasoning_content='why ')}\n\n"
        f"data: {chunk(content='<think>more</think>Hel')}\n\n"
        'data: {"choices": [{"index": 0,\ndata: "delta": {"content": "lo"}}]}\n\n'
        'data: {"choices": []}\n\n'
        f"data: {chunk(content='!')}\n\n"
        f"data: {chunk(content='unfinished')}"  # no blank line: never dispatched (SSE spec)
    ).encode()
    result = await model(fixed).call(MESSAGES)
    assert (result.response, result.reasoning) == ("Hello!", "why more")
    assert fixed.requests[0]["stream"] is True and fixed.requests[0]["model"] == "m"


async def test_nothing_after_done_is_read_as_an_event(fixed):
    fixed.body = f"data: {chunk(content='a')}\n\ndata: [DONE]\n\ndata: not json\n\n".encode()
    assert (await model(fixed).call(MESSAGES)).response == "a"


async def test_an_error_object_in_the_stream_is_a_model_error_with_the_key_masked(fixed):
    error = {"error": {"message": f"overloaded for key {KEY}", "code": 529}}
    fixed.body = f"data: {chunk(content='a')}\n\ndata: {json.dumps(error)}\n\n".encode()
    with pytest.raises(ModelError, match="in the stream: overloaded") as info:
        await model(fixed).call(MESSAGES)
    assert KEY not in info.value.message and "§§secret(API_KEY)" in info.value.message
    assert len(fixed.requests) == 1  # a chunk had arrived: never retried


async def test_an_error_body_that_is_not_json_is_shown_shortened(fixed):
    fixed.status, fixed.content_type = 400, "text/html"
    fixed.body = b"<html>" + b"x" * 2000 + b"</html>"
    with pytest.raises(ModelError, match=r"HTTP 400\): <html>x+$") as info:
        await model(fixed).call(MESSAGES)
    assert info.value.status == 400 and len(info.value.message) < 600


async def test_a_broken_event_is_a_model_error_not_a_stack_trace(fixed):
    fixed.body = b"data: {broken\n\n"
    with pytest.raises(ModelError, match="before any reply: JSONDecodeError"):
        await model(fixed).call(MESSAGES)


def test_the_transport_does_not_import_the_openai_sdk():
    """The SDK cost ~0.5 s of every start-up (issue #13); the transport speaks HTTP itself."""
    code = "import sys, python.helpers.models; print('openai' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "False"
