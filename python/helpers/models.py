"""The model transport: one streaming chat call to an OpenAI-compatible endpoint.

Retries 408/429/5xx (at most twice, short backoff) only while no chunk has arrived; once
a chunk arrived a failure is final. A connection that could not be made (refused, no such
host: not one byte of the request left) is tried again with backoff (``CONNECT_RETRIES``);
when it never succeeds the call raises ``ModelNotConfigured`` with ``sent=False``.
``preflight`` (python/helpers/model_preflight.py) finds what is knowable before anything is
sent: the seam asks it before it records a model call's intent.

Reasoning comes from ``delta.reasoning_content`` /
``delta.reasoning`` and from ``<think>...</think>`` in the content (split out, also across
chunk boundaries). Nothing touches the network at import or construction.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError

from python.helpers import files, images, yaml_files
from python.helpers.rate_limiter import RateLimiter, approx_tokens

PROVIDERS_FILE = "conf/model_providers.yaml"
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
MAX_RETRIES = 2
CONNECT_RETRIES = 3  # a connection refused before any byte left: tried again, with backoff
_RESERVED_KWARGS = {"model", "messages", "stream", "stream_options", "n"}

StreamCallback = Callable[[str, str], Awaitable[None]]


class ModelError(Exception):
    """A model call that failed; the message never holds the API key."""

    code = "model_error"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    #: False: proven that not one byte of the request left (the connection was never made)
    sent: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "status": self.status}


class ModelNotConfigured(ModelError):
    """The model cannot be called as configured, and nothing was sent: no API key, an
    unknown provider, a malformed base URL, a server that refuses the connection. Not an
    uncertain call: the turn fails with this error (the chat shows it with a way to the
    settings), nothing is held. ``reason`` is stable (docs/errors.md), ``setting`` names
    what to fix."""

    code = "model_not_configured"
    sent = False

    def __init__(self, message: str, *, reason: str, setting: str = "", kind: str = "chat"):
        super().__init__(message, None)
        self.reason = reason
        self.setting = setting
        self.kind = kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "reason": self.reason,
            "setting": self.setting,
            "kind": self.kind,
        }


@dataclass
class ModelResult:
    response: str
    reasoning: str = ""


@dataclass
class ModelConfig:
    provider: str
    name: str
    api_base: str = ""
    ctx_length: int = 128000
    kwargs: dict[str, Any] = field(default_factory=dict)
    rl_requests: int = 0
    rl_input: int = 0
    rl_output: int = 0
    vision: bool = False  # image parts are sent (chat_model_vision), else dropped

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], prefix: str) -> ModelConfig:
        """Build from flat settings, ``prefix`` being ``chat_model`` or ``util_model``."""

        def get(suffix: str, default: Any) -> Any:
            value = settings.get(f"{prefix}_{suffix}")
            return default if value is None else value

        return cls(
            provider=str(get("provider", "openai")),
            name=str(get("name", "")),
            api_base=str(get("api_base", "")),
            ctx_length=int(get("ctx_length", 128000)),
            kwargs=dict(get("kwargs", {}) or {}),
            rl_requests=int(get("rl_requests", 0)),
            rl_input=int(get("rl_input", 0)),
            rl_output=int(get("rl_output", 0)),
            vision=bool(get("vision", False)),
        )


@functools.cache
def _providers_cached(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as handle:
        data = yaml_files.safe_load(handle.read()) or {}
    table = data.get("chat", {}) if isinstance(data, dict) else {}
    return {
        str(pid): {"id": str(pid), **(entry or {})}
        for pid, entry in table.items()
        if isinstance(entry, dict | type(None))
    }


def load_providers() -> dict[str, dict]:
    """Provider id -> {id, name, api_base, key_required, ...} from conf/model_providers.yaml."""
    return {k: dict(v) for k, v in _providers_cached(str(files.BASE_DIR / PROVIDERS_FILE)).items()}


def _spelling(provider_id: str) -> str:
    """Case, '-' and '_' do not tell providers apart (``LM-Studio`` is ``lm_studio``)."""
    return provider_id.strip().lower().replace("-", "").replace("_", "")


def resolve_provider(provider_id: str) -> tuple[str, dict]:
    """(our id, its table entry) for an id as a user or upstream spells it (``lm_studio``,
    ``LMStudio``); an unknown id gives ``(id, {})``."""
    table = load_providers()
    if provider_id in table:
        return provider_id, table[provider_id]
    wanted = _spelling(provider_id)
    for pid, entry in table.items():
        spellings = {_spelling(pid), *(_spelling(str(a)) for a in entry.get("aliases") or [])}
        if wanted in spellings:
            return pid, entry
    return provider_id, {}


_limiters: dict[tuple[str, str, str], RateLimiter] = {}
_key_turns: dict[str, int] = {}


def limiter_for(config: ModelConfig) -> RateLimiter:
    """The shared limiter of one model (provider, name, endpoint), with the config's limits."""
    key = (config.provider, config.name, config.api_base)
    limiter = _limiters.get(key)
    if limiter is None:
        limiter = _limiters[key] = RateLimiter()
    limiter.set_limits(config.rl_requests, config.rl_input, config.rl_output)
    return limiter


def _message_tokens(messages: list[dict]) -> int:
    total = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += approx_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += approx_tokens(part["text"])
                elif isinstance(part, dict) and part.get("type") in ("image_url", "image"):
                    total += images.TOKENS_PER_IMAGE
    return total


class ThinkSplitter:
    """Splits streamed text into response and reasoning at ``<think>``/``</think>`` tags."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.thinking = False
        self._pending = ""

    def feed(self, text: str) -> tuple[str, str]:
        """(response, reasoning) that can be released after ``text``."""
        self._pending += text
        response: list[str] = []
        reasoning: list[str] = []
        while self._pending:
            tag = self.CLOSE if self.thinking else self.OPEN
            target = reasoning if self.thinking else response
            index = self._pending.find(tag)
            if index >= 0:
                target.append(self._pending[:index])
                self._pending = self._pending[index + len(tag) :]
                self.thinking = not self.thinking
                continue
            keep = _partial_suffix(self._pending, tag)
            target.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            break
        return "".join(response), "".join(reasoning)

    def flush(self) -> tuple[str, str]:
        rest, self._pending = self._pending, ""
        return ("", rest) if self.thinking else (rest, "")


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that starts ``tag``."""
    for size in range(min(len(text), len(tag) - 1), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


class ModelClient:
    """What every model client shares: the provider's entry, the key (used in turn when
    comma-separated), the endpoint, and masking the key out of error text."""

    retry_delay = 1.5  # seconds between retries (tests lower it)
    connect_delay = 0.5  # first wait after a refused connection; doubles each time

    def __init__(self, config: ModelConfig, api_key: str | None) -> None:
        self.config = config
        self._api_key = api_key or None
        self.provider_id, self.provider = resolve_provider(config.provider)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.provider}/{self.config.name})"

    @property
    def has_key(self) -> bool:
        """Whether an API key is configured (never the key itself)."""
        return any(k.strip() for k in (self._api_key or "").split(","))

    def _headers(self, key: str) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {key}"}
        header = str(self.provider.get("key_header") or "")
        if header:
            headers[header] = key
        return headers

    def _mask(self, text: str) -> str:
        keys = [self._api_key or "", *(self._api_key or "").split(",")]
        for key in sorted({k.strip() for k in keys}, key=len, reverse=True):
            if len(key) >= 4:
                text = text.replace(key, "§§secret(API_KEY)")
        return text

    def _next_key(self) -> str | None:
        """The key for this request; comma-separated keys are used in turn."""
        keys = [k.strip() for k in (self._api_key or "").split(",") if k.strip()]
        if not keys:
            return None
        turn = _key_turns.get(self.config.provider, 0)
        _key_turns[self.config.provider] = turn + 1
        return keys[turn % len(keys)]

    def _endpoint(self) -> tuple[str, str]:
        base = self.config.api_base or str(self.provider.get("api_base") or "")
        if not base:
            raise ModelError(
                f"no API base URL for provider '{self.config.provider}': "
                "set the model's api_base setting"
            )
        key = self._next_key()
        if not key:
            if self.provider.get("key_required", True):
                env = (
                    "API_KEY_"
                    + "".join(c if c.isalnum() else "_" for c in self.config.provider).upper()
                )
                raise ModelError(
                    f"no API key for provider '{self.config.provider}': set {env} in usr/.env",
                    401,
                )
            key = "none"
        return base, key


class ChatModel(ModelClient):
    """Streams one chat completion per ``call``; see the module docstring for retries."""

    def _unreachable(self, base: str, error: ModelError) -> ModelNotConfigured:
        return ModelNotConfigured(
            f"the model server at {base} could not be reached ({error.message}); "
            "is it running, and is the model's API base URL right?",
            reason="connection_refused",
            setting="api_base",
        )

    async def call(
        self,
        messages: list[dict],
        *,
        on_reasoning: StreamCallback | None = None,
        on_response: StreamCallback | None = None,
        read_blob: images.BlobReader | None = None,
    ) -> ModelResult:
        """Stream one completion; callbacks get ``(delta, full_so_far)``. Image parts
        (python/helpers/images.py) are sent as ``image_url`` parts read with ``read_blob``
        when the model has vision, else dropped (text only)."""
        base, key = self._endpoint()
        messages = await images.to_wire(messages, self.config.vision, read_blob)
        limiter = limiter_for(self.config)
        kwargs = {k: v for k, v in self.config.kwargs.items() if k not in _RESERVED_KWARGS}
        attempt = connects = 0
        while True:
            await limiter.acquire(_message_tokens(messages))
            stream = _Stream(on_reasoning, on_response)
            try:
                await self._stream_once(base, key, messages, kwargs, stream)
            except ModelError as error:
                if error.sent is False:  # the connection was never made: nothing left
                    if connects >= CONNECT_RETRIES:
                        raise self._unreachable(base, error) from None
                    connects += 1
                    await asyncio.sleep(self.connect_delay * 2 ** (connects - 1))
                    continue
                if stream.received or attempt >= MAX_RETRIES or error.status not in RETRY_STATUSES:
                    raise
                attempt += 1
                await asyncio.sleep(self.retry_delay * attempt)
                continue
            finally:
                limiter.add_output(approx_tokens(stream.response + stream.reasoning))
            return stream.result()

    async def _stream_once(
        self, base: str, key: str, messages: list[dict], kwargs: dict, stream: _Stream
    ) -> None:
        headers = {**self._headers(key), "Accept": "text/event-stream"}
        body = {**kwargs, "model": self.config.name, "messages": messages, "stream": True}
        try:
            async with (
                httpx.AsyncClient(timeout=_TIMEOUT, verify=tls_context(base)) as client,
                client.stream(
                    "POST", base.rstrip("/") + "/chat/completions", json=body, headers=headers
                ) as response,
            ):
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    status = response.status_code
                    raise ModelError(
                        self._mask(f"model call failed (HTTP {status}): {_error_text(text)}"),
                        status,
                    )
                async for data in _sse_data(response):
                    await stream.chunk(data)
                await stream.finish()
        except ModelError as error:
            raise ModelError(self._mask(error.message), error.status) from None
        except httpx.ConnectError as exc:  # no connection: not one byte of the request left
            unsent = ModelError(self._mask(f"could not connect: {exc}"))
            unsent.sent = False
            raise unsent from None
        except (httpx.HTTPError, SSEError, OSError, ValueError) as exc:
            where = "after the stream began" if stream.received else "before any reply"
            raise ModelError(
                self._mask(f"model call failed {where}: {type(exc).__name__}: {exc}")
            ) from None


_TIMEOUT = httpx.Timeout(600.0, connect=15.0)


@functools.cache
def _verifying_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


def tls_context(url: str) -> ssl.SSLContext:
    """The TLS settings of a model client for ``url``. httpx builds a new context for every
    client, ~45 ms of loading CA certificates at every model call; here the process builds
    one, as httpx does (certifi, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), on first need and
    shares it. A plain ``http://`` endpoint with no proxy in the environment cannot use TLS
    (the client follows no redirects), so it gets a verifying context without certificates
    instead: nothing loaded, and any TLS it were ever asked for would fail verification."""
    if url.lower().startswith("http://") and not urllib.request.getproxies():
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return _verifying_context()


async def _sse_data(response: httpx.Response) -> Any:
    """The JSON payload of each server-sent event until ``[DONE]`` (httpx-sse parses the
    stream: comments, multi-line data, event names); an ``error`` object in the stream
    raises ModelError. Nothing after ``[DONE]`` is read as an event."""
    async for event in EventSource(response).aiter_sse():
        if not event.data:
            continue
        if event.data.startswith("[DONE]"):
            return
        yield _event(event.data)


def _event(data: str) -> Any:
    payload = json.loads(data)
    if isinstance(payload, dict) and payload.get("error"):
        raise ModelError(f"model call failed in the stream: {_error_text(data)}")
    return payload


def _error_text(text: str) -> str:
    """The message of an OpenAI-style error body (``{"error": {"message": ...}}``), else the
    body itself, shortened."""
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()[:500] or "no error body"
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)
    return text.strip()[:500]


class _Stream:
    """Accumulates one streamed reply and drives the callbacks."""

    def __init__(self, on_reasoning: StreamCallback | None, on_response: StreamCallback | None):
        self.on_reasoning = on_reasoning
        self.on_response = on_response
        self.splitter = ThinkSplitter()
        self.response = ""
        self.reasoning = ""
        self.received = False

    async def chunk(self, chunk: Any) -> None:
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        if not choices or not isinstance(choices[0], dict):
            return
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            return
        native = delta.get("reasoning_content") or delta.get("reasoning")
        content = delta.get("content") or ""
        if not isinstance(content, str):
            content = ""
        if native or content:
            self.received = True
        if isinstance(native, str) and native:
            await self._emit("", native)
        if content:
            await self._emit(*self.splitter.feed(content))

    async def finish(self) -> None:
        await self._emit(*self.splitter.flush())

    async def _emit(self, response: str, reasoning: str) -> None:
        if reasoning:
            self.reasoning += reasoning
            if self.on_reasoning is not None:
                await self.on_reasoning(reasoning, self.reasoning)
        if response:
            self.response += response
            if self.on_response is not None:
                await self.on_response(response, self.response)

    def result(self) -> ModelResult:
        return ModelResult(self.response, self.reasoning)
