"""A scripted OpenAI-compatible model server on 127.0.0.1 for tests.

In-process use (the ``model_server`` fixture, registered by tests/conftest.py)::

    model_server.reply("hello", reasoning="thinking...")
    model_server.tool("response", {"text": "done"})
    model_server.fail(500)

As a separate process (outlives the agent in crash tests)::

    python -m tests.support.model_server --port 0 --script replies.jsonl

prints ``READY <url>`` on stdout. Each script line is a reply object
(``{"content": ..., "reasoning": ...}``) or a failure (``{"status": 500}``).
The process also serves ``GET /_script/requests`` (every request body so far) and
``POST /_script/queue`` (queue one more reply object or a list of them).

Embeddings: ``POST /v1/embeddings`` answers every input with a deterministic unit vector
(``scripted_vector``: the sum of one pseudo-random vector per lower-cased word, seeded by the
word's SHA-256, normalised), so texts that share words are similar and the same text always
gives the same vector. The dimension is ``embedding_dim`` (``--embedding-dim``; a request's
``dimensions`` wins). Requests are recorded in ``embedding_requests``
(``GET /_script/embedding_requests``); ``fail_embeddings(status)`` queues failures.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import random
import re
import signal
import struct
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

MODEL_ID = "scripted-model"
EMBEDDING_DIM = 64
_WORD = re.compile(r"\w+")


def _word_vector(word: str, dim: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:8], "big")
    rng = random.Random(seed)
    return [rng.gauss(0.0, 1.0) for _ in range(dim)]


def scripted_vector(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """The scripted embedding of ``text``: deterministic, unit length, and closer for texts
    that share words (a text without words embeds as its whole lower-cased self)."""
    words = _WORD.findall(text.lower()) or [text.lower()]
    total = [0.0] * dim
    for word in words:
        for i, value in enumerate(_word_vector(word, dim)):
            total[i] += value
    norm = math.sqrt(sum(v * v for v in total)) or 1.0
    return [v / norm for v in total]


@dataclass
class ScriptedFailure:
    """An HTTP error the server answers with instead of a completion."""

    status: int
    message: str = "scripted failure"


@dataclass
class ScriptedReply:
    """One completion: its text, optional reasoning, and how it is streamed."""

    content: str
    reasoning: str = ""
    chunks: int = 3
    cut_after_chunks: int | None = None  # drop the connection after this many SSE chunks
    delay: float = 0.0  # seconds before the first byte
    chunk_delay: float = 0.0  # seconds between streamed chunks


Outcome = ScriptedReply | ScriptedFailure


def _split(text: str, parts: int) -> list[str]:
    """Split text into at most ``parts`` non-empty pieces, in order."""
    if not text:
        return []
    parts = max(1, min(parts, len(text)))
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def outcome_from_obj(obj: dict) -> Outcome:
    """Build a reply or failure from a script object (one line of a .jsonl script)."""
    if "status" in obj:
        return ScriptedFailure(int(obj["status"]), str(obj.get("message", "scripted failure")))
    content = obj.get("content", "")
    if not isinstance(content, str):
        content = json.dumps(content)
    return ScriptedReply(
        content=content,
        reasoning=str(obj.get("reasoning", "")),
        chunks=int(obj.get("chunks", 3)),
        cut_after_chunks=obj.get("cut_after_chunks"),
        delay=float(obj.get("delay", 0.0)),
        chunk_delay=float(obj.get("chunk_delay", 0.0)),
    )


class ScriptedModel:
    """An OpenAI-compatible chat-completions server whose answers a test queues."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._port = port
        self._cond = threading.Condition()
        self._queue: deque[Outcome] = deque()
        self._responder: Callable[[dict], str | dict | ScriptedFailure] | None = None
        self._requests: list[dict] = []
        self._headers: list[dict[str, str]] = []
        self._server: _Server | None = None
        #: the dimension of scripted embeddings (a request's ``dimensions`` wins)
        self.embedding_dim = EMBEDDING_DIM
        self._embedding_requests: list[dict] = []
        self._embedding_failures: deque[ScriptedFailure] = deque()
        #: connections the client dropped mid-request (reset, broken pipe): not errors
        self.dropped_connections = 0
        self._thread: threading.Thread | None = None
        self.url = ""

    # lifecycle -------------------------------------------------------------
    def start(self) -> ScriptedModel:
        server = _Server((self._host, self._port), _make_handler(self), self)
        self._server = server
        host, port = server.server_address[:2]
        self.url = f"http://{host}:{port}/v1"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-model"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # scripting ---------------------------------------------------------------
    def reply(
        self,
        content: str | dict,
        *,
        reasoning: str = "",
        chunks: int = 3,
        cut_after_chunks: int | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
    ) -> None:
        """Queue one completion; a dict is sent as its JSON text."""
        text = content if isinstance(content, str) else json.dumps(content)
        self._push(ScriptedReply(text, reasoning, chunks, cut_after_chunks, delay, chunk_delay))

    def tool(
        self,
        tool_name: str,
        tool_args: dict,
        *,
        thoughts: tuple[str, ...] | list[str] = ("...",),
        headline: str = "",
    ) -> None:
        """Queue an Agent Zero tool-call reply."""
        self.reply(
            {
                "thoughts": list(thoughts),
                "headline": headline,
                "tool_name": tool_name,
                "tool_args": tool_args,
            }
        )

    def fail(self, status: int, message: str = "scripted failure", times: int = 1) -> None:
        """Queue ``times`` HTTP errors."""
        for _ in range(times):
            self._push(ScriptedFailure(status, message))

    def respond_with(self, fn: Callable[[dict], str | dict | ScriptedFailure]) -> None:
        """Answer with ``fn(request_body)`` whenever the queue is empty."""
        with self._cond:
            self._responder = fn

    def _push(self, outcome: Outcome) -> None:
        with self._cond:
            self._queue.append(outcome)

    def fail_embeddings(
        self, status: int, message: str = "scripted failure", times: int = 1
    ) -> None:
        """Answer the next ``times`` embedding requests with HTTP ``status``."""
        with self._cond:
            self._embedding_failures.extend(ScriptedFailure(status, message) for _ in range(times))

    # observation -------------------------------------------------------------
    @property
    def embedding_requests(self) -> list[dict]:
        """Every embeddings request body so far, in order."""
        with self._cond:
            return list(self._embedding_requests)

    @property
    def embedded_texts(self) -> list[str]:
        """Every text embedded so far (each request's inputs, in order)."""
        texts: list[str] = []
        for body in self.embedding_requests:
            given = body.get("input")
            texts.extend([given] if isinstance(given, str) else list(given or []))
        return texts

    @property
    def requests(self) -> list[dict]:
        with self._cond:
            return list(self._requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The HTTP headers of every chat request (names lower-cased), in order."""
        with self._cond:
            return list(self._headers)

    @property
    def calls(self) -> int:
        with self._cond:
            return len(self._requests)

    @property
    def pending(self) -> int:
        """Queued outcomes not yet used."""
        with self._cond:
            return len(self._queue)

    def wait_for_calls(self, n: int, timeout: float = 10) -> None:
        """Block until at least ``n`` requests arrived; AssertionError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._requests) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"model server got {len(self._requests)} calls, expected {n}"
                    )
                self._cond.wait(left)

    # used by the handler -----------------------------------------------------
    def _embeddings(self, body: dict) -> tuple[int, dict]:
        """(status, response body) of one embeddings request."""
        with self._cond:
            self._embedding_requests.append(body)
            self._cond.notify_all()
            failure = self._embedding_failures.popleft() if self._embedding_failures else None
            dim = self.embedding_dim
        if failure is not None:
            error = {"message": failure.message, "type": "scripted", "code": failure.status}
            return failure.status, {"error": error}
        given = body.get("input")
        texts = [given] if isinstance(given, str) else given
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            error = {"message": "input must be a string or a list of strings", "code": 400}
            return 400, {"error": error}
        dim = int(body.get("dimensions") or dim)
        data = []
        for index, text in enumerate(texts):
            vector: Any = scripted_vector(text, dim)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": vector})
        tokens = sum(len(_WORD.findall(t)) or 1 for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage}

    def _next_outcome(self, body: dict, headers: dict[str, str] | None = None) -> Outcome:
        with self._cond:
            self._headers.append(headers or {})
            self._requests.append(body)
            self._cond.notify_all()
            if self._queue:
                return self._queue.popleft()
            responder = self._responder
        if responder is None:
            return ScriptedFailure(500, "script exhausted")
        result = responder(body)
        if isinstance(result, ScriptedFailure | ScriptedReply):
            return result
        return ScriptedReply(result if isinstance(result, str) else json.dumps(result))


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex[:24]


def _chunk(cid: str, delta: dict, finish: str | None = None) -> dict:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _stream_events(reply: ScriptedReply) -> Iterator[dict]:
    cid = _completion_id()
    yield _chunk(cid, {"role": "assistant", "content": ""})
    for piece in _split(reply.reasoning, reply.chunks):
        yield _chunk(cid, {"reasoning_content": piece})
    for piece in _split(reply.content, reply.chunks):
        yield _chunk(cid, {"content": piece})
    yield _chunk(cid, {}, "stop")


def _completion(reply: ScriptedReply) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    return {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 1,
            "completion_tokens": max(1, len(reply.content) // 4),
            "total_tokens": 1 + max(1, len(reply.content) // 4),
        },
    }


class _Server(ThreadingHTTPServer):
    """The HTTP server; a client that drops its connection (a server under test killed
    mid-request, a client closing a kept-alive connection) is counted, not printed as a
    traceback. Every other error of a handler is printed as before."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, model: ScriptedModel) -> None:
        super().__init__(address, handler)
        self.model = model

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionResetError | BrokenPipeError):
            with self.model._cond:
                self.model.dropped_connections += 1
            return
        super().handle_error(request, client_address)


def _make_handler(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            return json.loads(raw or b"{}")

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]})
            elif self.path == "/_script/requests":
                self._json(200, {"requests": model.requests})
            elif self.path == "/_script/embedding_requests":
                self._json(200, {"requests": model.embedding_requests})
            else:
                self._json(404, {"error": {"message": "not found", "code": "not_found"}})

        def do_POST(self) -> None:
            try:
                body = self._body()
            except ValueError:
                self._json(400, {"error": {"message": "invalid JSON", "code": "bad_request"}})
                return
            if self.path == "/_script/queue":
                for obj in body if isinstance(body, list) else [body]:
                    model._push(outcome_from_obj(obj))
                self._json(200, {"queued": model.pending})
                return
            if self.path.rstrip("/") == "/v1/embeddings":
                self._json(*model._embeddings(body))
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, {"error": {"message": "not found", "code": "not_found"}})
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            outcome = model._next_outcome(body, headers)
            if isinstance(outcome, ScriptedFailure):
                error = {"message": outcome.message, "type": "scripted", "code": outcome.status}
                self._json(outcome.status, {"error": error})
                return
            if outcome.delay:
                time.sleep(outcome.delay)
            if body.get("stream"):
                self._stream(outcome)
            else:
                self._json(200, _completion(outcome))

        def _stream(self, reply: ScriptedReply) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for sent, event in enumerate(_stream_events(reply)):
                if reply.cut_after_chunks is not None and sent >= reply.cut_after_chunks:
                    # An incomplete chunked body: the client sees a broken stream.
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self._write_chunk(f"data: {json.dumps(event)}\n\n")
                if reply.chunk_delay:
                    time.sleep(reply.chunk_delay)
            self._write_chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _write_chunk(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


@pytest.fixture
def model_server() -> Iterator[ScriptedModel]:
    """A started ScriptedModel, stopped after the test."""
    with ScriptedModel() as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible model server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", type=Path, help="JSON lines: reply or failure objects")
    parser.add_argument("--embedding-dim", type=int, default=EMBEDDING_DIM)
    args = parser.parse_args(argv)
    server = ScriptedModel(args.host, args.port)
    server.embedding_dim = args.embedding_dim
    if args.script:
        for line in args.script.read_text(encoding="utf-8").splitlines():
            if line.strip():
                server._push(outcome_from_obj(json.loads(line)))
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    server.start()
    print(f"READY {server.url}", flush=True)
    while not stopped.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
