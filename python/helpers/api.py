"""HTTP endpoint base class, input validation and the one exception -> response table."""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import math
import pkgutil
from collections.abc import Callable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from durability.records import MAX_INT  # what the journal stores; larger numbers are refused
from python.helpers import http_limits, secrets
from python.helpers.log_safety import Verbatim

if TYPE_CHECKING:
    from python.durable.runtime import Runtime

logger = logging.getLogger("a0.api")

MAX_JSON_BYTES = http_limits.BodyLimits().json_bytes  # the default limit of a JSON body
MAX_JSON_DEPTH = 64  # nesting levels of a request body (every real body has a handful)


class ApiError(Exception):
    """An error with a stable code that the HTTP layer returns as JSON.

    ``details`` are extra JSON fields of the error object, e.g. ``field`` (the input field
    at fault) so that a form can show the message next to it.
    """

    def __init__(self, code: str, message: str, status: int = 400, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {**self.details, "code": self.code, "message": self.message}


def bad_request(message: str, **details: Any) -> ApiError:
    return ApiError("bad_request", message, 400, **details)


class ApiJSONResponse(JSONResponse):
    """UTF-8 JSON; text that is not valid Unicode (a lone surrogate from a tool's output)
    is sent escaped (``\\udxxx``) instead of failing the response."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            text = json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
            return text.encode("ascii")


def error_response(
    code: str, message: str, status: int, details: Mapping[str, Any] | None = None
) -> JSONResponse:
    """``{"error": {"code", "message", **details}}`` (details never replace code or message)."""
    error = {**(details or {}), "code": code, "message": message}
    return ApiJSONResponse({"error": error}, status_code=status)


def error_fields(exc: BaseException) -> dict[str, Any]:
    """The structured facts of a typed error (``to_dict()`` without code and message), as
    JSON data with known secrets masked; {} when there are none or they cannot be sent."""
    to_dict = getattr(exc, "to_dict", None)
    if not callable(to_dict):
        return {}
    try:
        data = to_dict()
        if not isinstance(data, dict):
            return {}
        fields = {k: v for k, v in data.items() if isinstance(k, str)}
        fields.pop("code", None)
        fields.pop("message", None)
        text = json.dumps(fields, default=str, allow_nan=False)
        masked = secrets.mask(json.loads(text))
    except Exception:  # the facts are a courtesy: never let them break the error itself
        return {}
    return masked if isinstance(masked, dict) else {}


def _mask(text: str) -> str:
    """Mask known secrets in text that leaves the process (best effort, never raises)."""
    try:
        return str(secrets.mask(text))
    except Exception:  # an unreadable usr/.env must not turn an error into a crash
        return text


def _mask_value(value: dict[str, Any]) -> dict[str, Any]:
    try:
        masked = secrets.mask(value)
        return masked if isinstance(masked, dict) else {}
    except Exception:  # same rule as _mask: never turn an error into a crash
        return {}


# (exception class name, code, status): matched by class name along the MRO so that this
# module imports nothing from the loop or the journal.
ERROR_TABLE: list[tuple[str, str, int]] = [
    ("SettingsError", "invalid_setting", 400),
    ("InputConflict", "input_conflict", 409),
    ("StaleVersion", "stale_version", 409),
    ("PromptNotFound", "prompt_not_found", 500),
    ("ModelError", "model_error", 502),
    ("TimeoutError", "timeout", 504),
    ("PermissionError", "forbidden", 403),
    ("FileNotFoundError", "not_found", 404),
    ("UnicodeDecodeError", "bad_request", 400),
    ("JSONDecodeError", "bad_request", 400),
]

_SAFE_MESSAGE_CODES = {
    "invalid_setting",
    "input_conflict",
    "stale_version",
    "model_error",
    "bad_request",
}


def exception_to_response(exc: BaseException) -> JSONResponse:
    """Turn any exception into a JSON error response; unknown ones become internal_error."""
    if isinstance(exc, ApiError):
        details = _mask_value(exc.details) if exc.details else None
        return error_response(exc.code, _mask(exc.message), exc.status, details)
    code = getattr(exc, "code", None)
    status = getattr(exc, "http_status", None)
    if isinstance(code, str) and code and isinstance(status, int) and 400 <= status < 600:
        # durability errors (and any other family) plug in by duck typing, with their facts
        return error_response(code, _mask(str(exc) or code), status, error_fields(exc))
    names = [cls.__name__ for cls in type(exc).__mro__]
    for name, code, status in ERROR_TABLE:
        if name in names:
            message = str(exc) if code in _SAFE_MESSAGE_CODES else _generic_message(code)
            return error_response(code, _mask(message or code), status)
    logger.error("internal error: %s", Verbatim(_mask(_format_exception(exc))))
    return error_response("internal_error", "Internal server error; see the server log.", 500)


def _generic_message(code: str) -> str:
    return {
        "timeout": "The operation timed out.",
        "forbidden": "Access denied.",
        "not_found": "Not found.",
        "prompt_not_found": "A prompt file is missing; see the server log.",
    }.get(code, code)


def _format_exception(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


# ---- input validation -------------------------------------------------------------------


def get_str(data: Mapping[str, Any], key: str, *, required: bool = False, default: str = "") -> str:
    value = data.get(key)
    if value is None or (value == "" and required is False):
        if required:
            raise bad_request(f"'{key}' is required")
        return default
    if not isinstance(value, str):
        raise bad_request(f"'{key}' must be a string")
    if required and not value.strip():
        raise bad_request(f"'{key}' must not be empty")
    return value


def get_int(
    data: Mapping[str, Any], key: str, *, default: int = 0, minimum: int | None = None
) -> int:
    value = data.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise bad_request(f"'{key}' must be an integer")
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise bad_request(f"'{key}' must be an integer") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise bad_request(f"'{key}' must be an integer")
    if abs(value) > MAX_INT:
        raise bad_request(f"'{key}' is out of range")
    if minimum is not None and value < minimum:
        raise bad_request(f"'{key}' must be at least {minimum}")
    return value


def get_number(data: Mapping[str, Any], key: str, *, default: float) -> float:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(f"'{key}' must be a number")
    if value <= 0:
        raise bad_request(f"'{key}' must be positive")
    if value > MAX_INT:
        raise bad_request(f"'{key}' is out of range")
    return float(value)


def get_bool(data: Mapping[str, Any], key: str, *, default: bool = False) -> bool:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    raise bad_request(f"'{key}' must be a boolean")


def get_dict(data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise bad_request(f"'{key}' must be an object")
    return value


def get_list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request(f"'{key}' must be a list")
    return value


# ---- handlers ---------------------------------------------------------------------------


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


async def read_input(request: Request) -> dict[str, Any]:
    """JSON object body, form fields (files under their field name as lists), or query args.

    Bodies are read within their limits (python.helpers.http_limits); the result is kept on
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
                raise ApiError("method_not_allowed", f"Use {', '.join(handler_cls.methods)}.", 405)
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
