"""Request bodies, limited while they stream (docs/security.md, "Request limits").

``BodyLimitMiddleware`` counts every body as it arrives and stops at the limit of its kind
(JSON, multipart, urlencoded): a body that is too large is refused with 413 and its rest is
never read (the connection closes). At most ``streams`` requests may stream a body at
once; one more waits up to ``STREAM_WAIT_SECONDS`` for a slot, then gets 503 with
``Retry-After``. ``read_form`` parses a form with a limit per part, so a multipart file
cannot grow its temporary file past the limit either.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from python.server.errors import ApiError, error_response

logger = logging.getLogger("a0.http")

MIB = 1024 * 1024
STREAM_WAIT_SECONDS = 10.0  # how long a body waits for a free stream slot before 503
RETRY_AFTER_SECONDS = 2
MAX_FORM_FIELDS = 1000  # text fields of one form (multipart or urlencoded)
MAX_FORM_FILES = 100  # files of one multipart body
MAX_TEXT_FIELD_BYTES = 1 * MIB  # one text field of a multipart body (held in memory)

# setting name (environment or usr/.env) -> BodyLimits field
ENV_NAMES = {
    "A0_HTTP_MAX_JSON_BYTES": "json_bytes",
    "A0_HTTP_MAX_FORM_BYTES": "form_bytes",
    "A0_HTTP_MAX_PART_BYTES": "part_bytes",
    "A0_HTTP_MAX_URLENCODED_BYTES": "urlencoded_bytes",
    "A0_HTTP_BODY_STREAMS": "streams",
}


class BodyRefused(ApiError):
    """A body the server will not read (on): a code and facts (``limit``, ``setting``),
    mapped to its status by the edge's table (python/server/errors.py)."""


def too_large(what: str, limit: int, setting: str = "") -> BodyRefused:
    """413 ``payload_too_large``; ``setting`` names the limit when an operator can set it."""
    message = f"The {what} is larger than {limit} bytes"
    if not setting:
        return BodyRefused("payload_too_large", f"{message}.", limit=limit)
    message += f" (the server's {setting})."
    return BodyRefused("payload_too_large", message, limit=limit, setting=setting)


def disconnected() -> BodyRefused:
    message = "The client closed the connection before the body was complete."
    return BodyRefused("bad_request", message)


def too_many(what: str, limit: int) -> BodyRefused:
    return BodyRefused("payload_too_large", f"The form has more than {limit} {what}.")


@dataclass(frozen=True)
class BodyLimits:
    """Bytes per body kind, bytes per multipart file, and the concurrent-stream bound."""

    json_bytes: int = 10 * MIB
    form_bytes: int = 200 * MIB
    part_bytes: int = 100 * MIB
    urlencoded_bytes: int = 1 * MIB
    streams: int = 16

    @classmethod
    def load(cls, usr: Path | None = None, environ: Mapping[str, str] | None = None) -> BodyLimits:
        """The ``A0_HTTP_*`` settings (environment, then usr/.env), read once at start-up;
        a value that is not a positive integer is ignored with a warning."""
        from python.helpers import settings

        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for name, attr in ENV_NAMES.items():
            raw = settings.env_value(name, usr, env).strip()
            if not raw:
                continue
            try:
                value = int(raw)
                if value <= 0:
                    raise ValueError
            except ValueError:
                logger.warning("%s=%r is not a positive integer; the default applies", name, raw)
                continue
            values[attr] = value
        return cls(**values)

    def for_content_type(self, content_type: str) -> tuple[str, int, str]:
        """(what the body is, its limit, the setting that names the limit)."""
        kind = content_type.split(";", 1)[0].strip().lower()
        if kind == "multipart/form-data":
            return "multipart body", self.form_bytes, "A0_HTTP_MAX_FORM_BYTES"
        if kind == "application/x-www-form-urlencoded":
            return "form body", self.urlencoded_bytes, "A0_HTTP_MAX_URLENCODED_BYTES"
        return "request body", self.json_bytes, "A0_HTTP_MAX_JSON_BYTES"


def limits_of(request: Request) -> BodyLimits:
    """The limits the middleware put on the request (the defaults without it)."""
    found = request.scope.get("state", {}).get("body_limits")
    return found if isinstance(found, BodyLimits) else BodyLimits()


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class BodyLimitMiddleware:
    """Counts request bodies while they stream; see the module docstring."""

    def __init__(
        self,
        app: ASGIApp,
        limits: BodyLimits | None = None,
        wait_seconds: float = STREAM_WAIT_SECONDS,
    ) -> None:
        self.app = app
        self.limits = limits or BodyLimits()
        self.wait_seconds = wait_seconds
        self._slots = asyncio.Semaphore(self.limits.streams)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["body_limits"] = self.limits
        what, limit, setting = self.limits.for_content_type(_header(scope, b"content-type") or "")
        length_text = _header(scope, b"content-length")
        chunked = _header(scope, b"transfer-encoding") is not None
        length = int(length_text) if length_text and length_text.strip().isdigit() else 0
        if length > limit:  # refused before a byte of it is read
            await _refuse(too_large(what, limit, setting), scope, send)
            return
        stream = _Stream(self._slots, self.wait_seconds, limit, what, setting)
        stream.done = length == 0 and not chunked  # no body: nothing to count

        async def limited_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = stream.response_start(message)
            await send(message)

        try:
            await self.app(scope, stream.wrap(receive), limited_send)
        finally:
            stream.release()


class _Stream:
    """One request's body: its byte count, its slot and whether it was read to the end."""

    def __init__(
        self, slots: asyncio.Semaphore, wait: float, limit: int, what: str, setting: str
    ) -> None:
        self.slots, self.wait = slots, wait
        self.limit, self.what, self.setting = limit, what, setting
        self.done = False  # the whole body was received (or there is none)
        self.received = 0
        self.holding = False
        self.busy = False

    def wrap(self, receive: Receive) -> Receive:
        async def limited_receive() -> Message:
            if self.done:
                return await receive()
            if not self.holding:
                await self._acquire()
            message = await receive()
            if message["type"] == "http.request":
                self.received += len(message.get("body", b""))
                if self.received > self.limit:
                    self.release()
                    raise too_large(self.what, self.limit, self.setting)
                if not message.get("more_body", False):
                    self.done = True
                    self.release()
            else:  # the client went away
                self.release()
            return message

        return limited_receive

    async def _acquire(self) -> None:
        try:
            if not self.slots.locked():
                await self.slots.acquire()  # free: returns at once
            elif self.wait <= 0:
                raise TimeoutError
            else:
                await asyncio.wait_for(self.slots.acquire(), self.wait)
        except TimeoutError:
            self.busy = True
            message = "Too many uploads at once; try again shortly."
            raise BodyRefused("server_busy", message) from None
        self.holding = True

    def release(self) -> None:
        if self.holding:
            self.holding = False
            self.slots.release()

    def response_start(self, message: Message) -> Message:
        """A response sent before the body was read to its end closes the connection, so
        the rest is never read; a busy refusal says when to try again."""
        extra: list[tuple[bytes, bytes]] = []
        if not self.done:
            extra.append((b"connection", b"close"))
        if self.busy:
            extra.append((b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
        if not extra:
            return message
        return {**message, "headers": [*message.get("headers", []), *extra]}


async def _refuse(exc: BodyRefused, scope: Scope, send: Send) -> None:
    headers = {"connection": "close"}
    response = error_response(exc.code, exc.message, exc.fields, headers=headers)

    async def no_body() -> Message:
        return {"type": "http.disconnect"}

    await response(scope, no_body, send)


# ---- forms ------------------------------------------------------------------------------


class _LimitedMultiPart(MultiPartParser):
    """Starlette's parser with a limit on every part (files included) and counts refused
    with 413: the part's data is refused before it reaches its temporary file."""

    def __init__(
        self,
        headers: Any,
        stream: AsyncGenerator[bytes, None],
        limits: BodyLimits,
        *,
        files: bool = True,
    ) -> None:
        super().__init__(
            headers,
            stream,
            max_files=MAX_FORM_FILES if files else 0,
            max_fields=MAX_FORM_FIELDS,
            max_part_size=MAX_TEXT_FIELD_BYTES,
        )
        self.file_limit = limits.part_bytes
        # text fields are held in memory: together no more than a JSON body (a form that
        # takes no files, the login form, no more than an urlencoded one)
        self.text_limit = limits.json_bytes if files else limits.urlencoded_bytes
        self.text_setting = "A0_HTTP_MAX_JSON_BYTES" if files else "A0_HTTP_MAX_URLENCODED_BYTES"
        self._part_bytes = 0
        self._text_bytes = 0

    def on_part_begin(self) -> None:
        super().on_part_begin()
        self._part_bytes = 0

    def on_end(self) -> None:
        self._ended = True

    async def parse(self) -> FormData:
        """Starlette's parse, and a body cut before its closing boundary is refused (its
        unfinished part's temporary file closed) instead of read as a shorter form."""
        self._ended = False
        form = await super().parse()
        if not self._ended:
            for file in self._files_to_close_on_error:
                file.close()
            message = "The multipart body ends before its closing boundary."
            raise BodyRefused("bad_request", message)
        return form

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        self._part_bytes += end - start
        if self._current_part.file is not None and self._part_bytes > self.file_limit:
            raise too_large("file part", self.file_limit, "A0_HTTP_MAX_PART_BYTES")
        if self._current_part.file is None:
            self._text_bytes += end - start
            if self._part_bytes > MAX_TEXT_FIELD_BYTES:
                raise too_large("text field", MAX_TEXT_FIELD_BYTES)
            if self._text_bytes > self.text_limit:
                raise too_large("form's text", self.text_limit, self.text_setting)
        super().on_part_data(data, start, end)

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._current_part.content_disposition)
        if b"filename" in options and self._current_files >= self.max_files:
            if not self.max_files:
                raise BodyRefused("bad_request", "This form takes no files.")
            raise too_many("files", MAX_FORM_FILES)
        if b"filename" not in options and self._current_fields >= self.max_fields:
            raise too_many("fields", MAX_FORM_FIELDS)
        super().on_headers_finished()


class _LimitedUrlencoded(FormParser):
    """Starlette's urlencoded parser with its count refused with 413 (the byte total is the
    middleware's limit)."""

    def __init__(
        self, headers: Any, stream: AsyncGenerator[bytes, None], limits: BodyLimits, **_: Any
    ) -> None:
        limit = limits.urlencoded_bytes
        super().__init__(headers, stream, max_fields=MAX_FORM_FIELDS, max_part_size=limit)

    def on_field_end(self) -> None:
        if self._current_fields >= self.max_fields:
            raise too_many("fields", MAX_FORM_FIELDS)
        super().on_field_end()


async def read_form(request: Request, *, files: bool = True) -> FormData:
    """The request's form (multipart or urlencoded) within its limits; a malformed form is
    400 ``bad_request``, one over a limit 413 ``payload_too_large``. With ``files=False`` a
    file part is refused before any of it is stored."""
    limits = limits_of(request)
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    parser_cls = _LimitedMultiPart if kind == "multipart/form-data" else _LimitedUrlencoded
    try:
        async with aclosing(request.stream()) as stream:
            return await parser_cls(request.headers, stream, limits, files=files).parse()
    except ClientDisconnect:
        raise disconnected() from None
    except MultiPartException as exc:
        raise BodyRefused("bad_request", f"The form is malformed: {exc.message}") from None
    except (ValueError, LookupError) as exc:  # a header or charset the parser cannot use
        raise BodyRefused("bad_request", f"The form is malformed: {exc}") from None
