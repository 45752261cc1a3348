"""Typed reads of a request's or a tool call's input: a value of a wrong type, missing or
out of range is a ``BadRequest`` (code ``bad_request``) naming the key."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from durability.records import MAX_INT  # what the journal stores; larger numbers are refused
from python.helpers.errors import BadRequest


def bad_request(message: str, **fields: Any) -> BadRequest:
    return BadRequest(message, **fields)


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
