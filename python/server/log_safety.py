"""What a client sends reaches the server log only escaped, truncated, and never a secret.

``SafeArgsFilter`` rewrites the arguments of every log record (a chat id, a task id, a
path): control characters (a newline that would forge a log line) are escaped and long
values are cut. ``AccessLogFilter`` drops the values of uvicorn's access-log query strings,
so a key put in a URL (``?api_key=...``) is never written. ``install`` puts both on the
handlers of the running server (run_ui.py).
"""

from __future__ import annotations

import logging
import re
from typing import Any

MAX_ARG_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class Verbatim(str):
    """Server-made text that is multi-line by design (a traceback): logged as is."""


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char, f"\\x{ord(char):02x}")


def clean(value: str, limit: int = MAX_ARG_CHARS) -> str:
    """``value`` with control characters escaped, cut to ``limit`` characters."""
    text = _CONTROL.sub(_escape, value)
    if len(text) > limit:
        text = f"{text[:limit]}...(+{len(text) - limit} chars)"
    return text


def _clean_arg(value: Any) -> Any:
    if isinstance(value, Verbatim) or value is None or isinstance(value, int | float):
        return value
    return clean(value if isinstance(value, str) else str(value))


class SafeArgsFilter(logging.Filter):
    """Escape and truncate the arguments of a log record (its format string is the code's)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_clean_arg(a) for a in args)
        elif isinstance(args, dict):
            record.args = {k: _clean_arg(v) for k, v in args.items()}
        return True


def path_without_secrets(path: str) -> str:
    """A request target with each query value dropped (``/a?api_key=x&b=1`` ->
    ``/a?api_key=...&b=...``) and control characters escaped."""
    base, sep, query = path.partition("?")
    if sep:
        names = [part.split("=", 1)[0] for part in query.split("&") if part]
        base += "?" + "&".join(f"{name[:40]}=..." for name in names[:20])
    return clean(base, limit=400)


class AccessLogFilter(logging.Filter):
    """uvicorn.access records: ``(client, method, path, http version, status)``."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], path_without_secrets(args[2]), *args[3:])
        return True


def install() -> None:
    """Add the filters to the root handlers (the a0.* loggers) and to uvicorn's loggers;
    call it after uvicorn's Config has configured logging."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, SafeArgsFilter) for f in handler.filters):
            handler.addFilter(SafeArgsFilter())
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogFilter) for f in access.filters):
        access.addFilter(AccessLogFilter())
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, SafeArgsFilter) for f in logger.filters):
            logger.addFilter(SafeArgsFilter())
