"""Where errors become responses: the one code -> status table of the HTTP edge.

Below the edge nothing knows an HTTP status. The glue and the tools raise
``python.helpers.errors.DomainError`` (``ChatNotFound``, ``ShuttingDown``, ``BadRequest``,
...), the journal ``durability.errors.DurabilityError``, the endpoints ``ApiError`` (a
refusal whose code they name); each carries a stable ``code``, a message and fields.
``exception_to_response`` turns any exception into ``{"error": {"code", "message",
**fields}}`` with the status ``STATUS[code]``, like Starlette's ``exception_handlers``:
one table, read in one place. docs/errors.md documents every code of the table
(tests/unit/test_api_docs.py checks that it does, with the status).
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

from durability.errors import DurabilityError
from python.helpers import secrets
from python.helpers.errors import DomainError
from python.server.log_safety import Verbatim

logger = logging.getLogger("a0.api")

#: Every code the server answers with, and its status.
STATUS: dict[str, int] = {
    # the edge: guards, bodies, routing
    "bad_request": 400,
    "api_key_in_url": 400,
    "host_not_allowed": 400,
    "unauthorized": 401,
    "csrf_failed": 403,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "payload_too_large": 413,
    "too_many_requests": 429,
    "internal_error": 500,
    "server_busy": 503,
    # the endpoints
    "invalid_setting": 400,
    "not_a_directory": 400,
    "is_a_directory": 400,
    "path_outside_workdir": 403,
    "file_not_found": 404,
    "not_a_text_file": 400,
    "file_exists": 409,
    "mcp_server_not_found": 404,
    "stale_revision": 409,
    "prompt_not_found": 500,
    "model_error": 502,
    "timeout": 504,
    # the glue (python.helpers.errors)
    "context_not_found": 404,
    "context_exists": 409,
    "chat_stopped": 409,
    "task_busy": 409,
    "image_invalid": 400,
    "shutting_down": 503,
    # the journal (durability.errors, docs/durability.md)
    "durability_error": 500,
    "invalid_argument": 400,
    "not_serializable": 400,
    "document_invalid": 400,
    "resource_refused": 400,
    "task_invalid": 400,
    "run_not_found": 404,
    "call_not_found": 404,
    "conflict_not_found": 404,
    "blob_not_found": 404,
    "screenshot_not_found": 404,
    "resource_not_found": 404,
    "task_not_found": 404,
    "memory_not_found": 404,
    "memory_backend_unavailable": 503,
    "input_conflict": 409,
    "active_run_exists": 409,
    "run_held": 409,
    "no_active_run": 409,
    "run_not_active": 409,
    "run_not_held": 409,
    "invalid_transition": 409,
    "open_intents": 409,
    "no_open_call": 409,
    "decision_not_applicable": 409,
    "intent_missing": 409,
    "result_conflict": 409,
    "deferred_write_refused": 409,
    "replay_divergence": 409,
    "stale_version": 409,
    "document_conflict": 409,
    "fencing_lost": 409,
    "task_conflict": 409,
    "task_exists": 409,
    "document_too_large": 413,
    "resource_too_large": 413,
    "note_required": 422,
    "corrupt_checkpoint": 500,
    "corrupt_record": 500,
    "corrupt_database": 500,
    "schema_too_new": 500,
    "invalid_configuration": 500,
    "resource_undecryptable": 500,
    "storage_error": 503,
    "journal_closed": 503,
}

#: Exceptions of other families (the standard library, the loop's helpers), matched by
#: class name along the MRO so that this module imports nothing of the loop: their code.
FOREIGN: list[tuple[str, str]] = [
    ("SettingsError", "invalid_setting"),
    ("PromptNotFound", "prompt_not_found"),
    ("ModelError", "model_error"),
    ("TimeoutError", "timeout"),
    ("PermissionError", "forbidden"),
    ("FileNotFoundError", "not_found"),
    ("UnicodeDecodeError", "bad_request"),
    ("JSONDecodeError", "bad_request"),
]

#: Foreign errors whose own message is safe to send; the others get a generic one.
_SAFE_MESSAGE_CODES = {
    "invalid_setting",
    "model_error",
    "bad_request",
}

_GENERIC_MESSAGES = {
    "timeout": "The operation timed out.",
    "forbidden": "Access denied.",
    "not_found": "Not found.",
    "prompt_not_found": "A prompt file is missing; see the server log.",
}


class ApiError(DomainError):
    """An endpoint's refusal: ``ApiError(code, message, **fields)``. ``fields`` are extra
    JSON fields of the error object, e.g. ``field`` (the input field at fault) so that a
    form can show the message next to it. The status is the table's."""

    def __init__(self, code: str, message: str, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.code = code


def status_of(code: str) -> int:
    """The status of a code (500 for a code the table lacks: a bug the docs test finds)."""
    return STATUS.get(code, 500)


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
    code: str,
    message: str,
    details: Mapping[str, Any] | None = None,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """``{"error": {"code", "message", **details}}`` (details never replace code or
    message) with the table's status; ``status`` only for Starlette's own HTTP errors."""
    error = {**(details or {}), "code": code, "message": message}
    status = status_of(code) if status is None else status
    return ApiJSONResponse({"error": error}, status_code=status, headers=headers)


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


def mask(text: str) -> str:
    """Mask known secrets in text that leaves the process (best effort, never raises)."""
    try:
        return str(secrets.mask(text))
    except Exception:  # an unreadable usr/.env must not turn an error into a crash
        return text


def exception_to_response(exc: BaseException) -> JSONResponse:
    """Turn any exception into a JSON error response; unknown ones become internal_error."""
    if isinstance(exc, DomainError | DurabilityError):
        code = exc.code
        return error_response(code, mask(str(exc) or code), error_fields(exc))
    names = [cls.__name__ for cls in type(exc).__mro__]
    for name, code in FOREIGN:
        if name in names:
            message = str(exc) if code in _SAFE_MESSAGE_CODES else _GENERIC_MESSAGES.get(code, code)
            return error_response(code, mask(message or code))
    logger.error("internal error: %s", Verbatim(mask(_format_exception(exc))))
    return error_response("internal_error", "Internal server error; see the server log.")


def _format_exception(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
