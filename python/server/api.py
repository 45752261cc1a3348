"""The endpoint base class (``ApiHandler``), reading a request's input, and the endpoint
wrapper that turns every error into a response (python/server/errors.py has the table)."""

from __future__ import annotations

import importlib
import inspect
import json
import math
import pkgutil
from collections.abc import Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from python.helpers.inputs import (  # the endpoints' validators, re-exported for them
    bad_request,
    get_bool,
    get_dict,
    get_int,
    get_list,
    get_number,
    get_str,
)
from python.server import http_limits
from python.server.errors import ApiError, ApiJSONResponse, error_response, exception_to_response

if TYPE_CHECKING:
    from python.server.runtime import Runtime

__all__ = [
    "ApiError",
    "ApiHandler",
    "ApiJSONResponse",
    "bad_request",
    "discover_handlers",
    "error_response",
    "exception_to_response",
    "get_bool",
    "get_dict",
    "get_int",
    "get_list",
    "get_number",
    "get_str",
    "make_endpoint",
    "read_input",
]

MAX_JSON_BYTES = http_limits.BodyLimits().json_bytes  # the default limit of a JSON body
MAX_JSON_DEPTH = 64  # nesting levels of a request body (every real body has a handful)


class ApiHandler:
    """One endpoint. Subclasses live one per module in python/api/ and set the class flags."""

    requires_auth: bool = True
    requires_csrf: bool | None = None  # None: same as requires_auth
    requires_api_key: bool = False
    accepts_api_key: bool = False  # X-API-KEY instead of session + CSRF (durable_* endpoints)
    requires_loopback: bool = False
    methods: tuple[str, ...] = ("POST",)

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    @classmethod
    def csrf_required(cls) -> bool:
        return cls.requires_auth if cls.requires_csrf is None else cls.requires_csrf

    async def process(self, input: dict[str, Any], request: Request) -> dict[str, Any] | Response:
        raise NotImplementedError


class ExternalApiHandler(ApiHandler):
    """An endpoint of the external API: the X-API-KEY header only (no session, no CSRF)."""

    requires_auth = False
    requires_csrf = False
    requires_api_key = True


async def read_input(request: Request) -> dict[str, Any]:
    """JSON object body, form fields (files under their field name as lists), or query args.

    Bodies are read within their limits (python.server.http_limits); the result is kept on
    the request, so a guard that needed the body (the API key) and the handler read it once.
    """
    cached = getattr(request.state, "input", None)
    if isinstance(cached, dict):
        return dict(cached)
    data = await _parse_input(request)
    request.state.input = data
    return dict(data)


async def _parse_input(request: Request) -> dict[str, Any]:
    data: dict[str, Any] = dict(request.query_params)
    if request.method in ("GET", "HEAD"):
        return data
    content_type = request.headers.get("content-type", "").lower()
    if content_type.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        form = await http_limits.read_form(request)
        request.state.form = form  # closed by the endpoint wrapper
        for key in form:
            values = form.getlist(key)
            files = [v for v in values if not isinstance(v, str)]
            data[key] = files if files else values[-1]
        return data
    body = await _read_body(request, http_limits.limits_of(request).json_bytes)
    if not body.strip():
        return data
    try:
        parsed = json.loads(body, parse_constant=_no_constant, parse_float=_finite_float)
    except (ValueError, UnicodeDecodeError):
        raise bad_request("The body is not valid JSON.") from None
    except RecursionError:
        raise bad_request(f"The JSON body is nested more than {MAX_JSON_DEPTH} levels.") from None
    if not isinstance(parsed, dict):
        raise bad_request("The JSON body must be an object.")
    _check_body(parsed)
    data.update(parsed)
    return data


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, counted while it streams: past ``limit`` it is refused (413) at once (the
    middleware refuses it too, and closes the connection on the rest)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async with aclosing(request.stream()) as stream:
            async for chunk in stream:
                size += len(chunk)
                if size > limit:
                    raise http_limits.too_large("request body", limit, "A0_HTTP_MAX_JSON_BYTES")
                chunks.append(chunk)
    except ClientDisconnect:
        raise http_limits.disconnected() from None
    return b"".join(chunks)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity, -Infinity


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number out of range")
    return value


def _check_body(value: Any) -> None:
    """Refuse a body nested deeper than MAX_JSON_DEPTH or holding text that is not valid
    Unicode (JSON can escape a lone surrogate; nothing downstream can store or send it)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and not _valid_unicode(item):
                raise bad_request("The JSON body holds text that is not valid Unicode.")
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise bad_request(f"The JSON body is nested more than {MAX_JSON_DEPTH} levels.")
        stack.extend((child, depth + 1) for child in children)


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


Guard = Callable[[type[ApiHandler], Request], Any]


def make_endpoint(handler_cls: type[ApiHandler], runtime: Runtime, guard: Guard):
    """Wrap a handler class into a Starlette endpoint: guard, parse, process, map errors."""

    async def endpoint(request: Request) -> Response:
        try:
            if request.method not in handler_cls.methods:
                raise ApiError("method_not_allowed", f"Use {', '.join(handler_cls.methods)}.")
            await guard(handler_cls, request)
            data = await read_input(request)
            result = await handler_cls(runtime).process(data, request)
            if isinstance(result, Response):
                return result
            return ApiJSONResponse(result if result is not None else {})
        except Exception as exc:  # the one place that turns errors into responses
            return exception_to_response(exc)
        finally:
            form = getattr(request.state, "form", None)
            if form is not None:
                await form.close()

    return endpoint


def discover_handlers(package: str = "python.api") -> dict[str, type[ApiHandler]]:
    """Import every module of the package and return {module name: its ApiHandler subclass}."""
    pkg = importlib.import_module(package)
    found: dict[str, type[ApiHandler]] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(obj, ApiHandler)
                and obj is not ApiHandler
                and obj.__module__ == module.__name__
            ):
                found[info.name] = obj
                break
    return found
