"""Argument checks and masking shared by every journal operation (before any transaction)."""

from __future__ import annotations

import math
import re
from typing import Any

from durability.canonical import digest, is_digest, storable_json
from durability.errors import InvalidArgument, NotSerializable
from durability.masking import Masker
from durability.records import MAX_INT

MAX_ID_LENGTH = 200
_CONTROL_CHARS = re.compile(r"[\x00-\x1f]")


def require_text(field: str, value: object, max_length: int = MAX_ID_LENGTH) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise InvalidArgument(f"{field} must be a non-empty string", field=field)
    if _CONTROL_CHARS.search(value):
        raise InvalidArgument(f"{field} contains control characters", field=field)
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(f"{field} is not valid Unicode", field=field) from None
    return value


def require_int(field: str, value: object, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidArgument(f"{field} must be an integer >= {minimum}", field=field)
    if value > MAX_INT:
        raise InvalidArgument(f"{field} must be at most {MAX_INT}", field=field)
    return value


def require_instant(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(f"{field} must be a finite number of seconds", field=field)
    return float(value)


def require_digest(field: str, value: object) -> str:
    if not is_digest(value):
        raise InvalidArgument(f"{field} must be a lowercase hex SHA-256", field=field)
    return str(value)


def mask_only(masker: Masker, value: Any) -> Any:
    try:
        return masker.mask(value)
    except RecursionError:
        raise NotSerializable("value is nested too deeply", reason="too_deep") from None


def mask_storable(masker: Masker, value: Any) -> Any:
    """Masked, and refused before any transaction when it cannot be stored."""
    masked = mask_only(masker, value)
    storable_json(masked)
    return masked


#: A value the async facade prepares on the event loop (masking, canonical JSON) rather
#: than in a worker thread: at most this many characters and this many containers.
LIGHT_CHARS = 64 * 1024
LIGHT_NODES = 256


def event_payload(
    masker: Masker, context_id: object, type_field: str, event_type: object, payload: Any
) -> tuple[Any, str]:
    """An event's checked chat and type (named ``type_field`` in an error), and its payload
    masked with that masked payload's digest."""
    require_text("context_id", context_id)
    require_text(type_field, event_type, max_length=64)
    masked = mask_storable(masker, payload)
    return masked, digest(masked)


def is_light(*values: Any) -> bool:
    """True when preparing ``values`` costs little: no long text, few containers (a bounded
    walk that stops as soon as either limit is passed)."""
    chars, nodes = 0, 0
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str | bytes | bytearray):
            chars += len(value)
            if chars > LIGHT_CHARS:
                return False
        elif isinstance(value, dict):
            nodes += 1
            if nodes > LIGHT_NODES:
                return False
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            nodes += 1
            if nodes > LIGHT_NODES:
                return False
            stack.extend(value)
        elif not isinstance(value, int | float | bool | None):
            nodes += 1  # any other object: its masking or serialisation decides
            if nodes > LIGHT_NODES:
                return False
    return True
