"""The model transport: one streaming chat call to an OpenAI-compatible endpoint.

Retries 408/429/5xx (at most twice, short backoff) only while no chunk has arrived; once
a chunk arrived a failure is final. Reasoning comes from ``delta.reasoning_content`` /
``delta.reasoning`` and from ``<think>...</think>`` in the content (split out, also across
chunk boundaries). Nothing touches the network at import or construction.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import httpx
import openai
import yaml

from python.helpers import files
from python.helpers.rate_limiter import RateLimiter, approx_tokens

if TYPE_CHECKING:  # pragma: no cover
    from openai.types.chat import ChatCompletionChunk

PROVIDERS_FILE = "conf/model_providers.yaml"
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
MAX_RETRIES = 2
_RESERVED_KWARGS = {"model", "messages", "stream", "stream_options", "n"}

StreamCallback = Callable[[str, str], Awaitable[None]]


class ModelError(Exception):
    """A model call that failed; the message never holds the API key."""

    code = "model_error"

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "status": self.status}


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
        )


@functools.cache
def _providers_cached(path: str) -> dict[str, dict]:
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
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


class ChatModel:
    """Streams one chat completion per ``call``; see the module docstring for retries."""

    retry_delay = 1.5  # seconds between retries (tests lower it)

    def __init__(self, config: ModelConfig, api_key: str | None) -> None:
        self.config = config
        self._api_key = api_key or None
        self.provider_id, self.provider = resolve_provider(config.provider)

    def __repr__(self) -> str:
        return f"ChatModel({self.config.provider}/{self.config.name})"

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

    async def call(
        self,
        messages: list[dict],
        *,
        on_reasoning: StreamCallback | None = None,
        on_response: StreamCallback | None = None,
    ) -> ModelResult:
        """Stream one completion; callbacks get ``(delta, full_so_far)``."""
        base, key = self._endpoint()
        limiter = limiter_for(self.config)
        kwargs = {k: v for k, v in self.config.kwargs.items() if k not in _RESERVED_KWARGS}
        attempt = 0
        while True:
            await limiter.acquire(_message_tokens(messages))
            stream = _Stream(on_reasoning, on_response)
            try:
                await self._stream_once(base, key, messages, kwargs, stream)
            except ModelError as error:
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
        try:
            header = str(self.provider.get("key_header") or "")
            async with openai.AsyncOpenAI(
                base_url=base,
                api_key=key,
                max_retries=0,
                timeout=openai.Timeout(600.0, connect=15.0),
                default_headers={header: key} if header else None,
            ) as client:
                created = await client.chat.completions.create(
                    model=self.config.name, messages=cast(Any, messages), stream=True, **kwargs
                )
                response = cast("openai.AsyncStream[ChatCompletionChunk]", created)
                async with response:
                    async for chunk in response:
                        await stream.chunk(chunk)
                await stream.finish()
        except openai.APIStatusError as exc:
            raise ModelError(
                self._mask(f"model call failed (HTTP {exc.status_code}): {_error_text(exc)}"),
                exc.status_code,
            ) from None
        except (openai.APIError, httpx.HTTPError, OSError) as exc:
            where = "after the stream began" if stream.received else "before any reply"
            raise ModelError(
                self._mask(f"model call failed {where}: {type(exc).__name__}: {exc}")
            ) from None


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return str(exc.message)


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
        if not chunk.choices:
            return
        delta = chunk.choices[0].delta
        if delta is None:
            return
        native = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        content = delta.content or ""
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
