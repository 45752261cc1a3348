"""The model's reply as a tool request: {thoughts, headline, tool_name, tool_args}."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from python.helpers import dirty_json

QUOTES = "\"'`"


@dataclass
class ToolRequest:
    name: str
    method: str | None
    args: dict[str, Any] = field(default_factory=dict)
    thoughts: Any = None
    headline: str = ""


def parse_tool_request(text: str) -> ToolRequest | None:
    """The tool request in `text`, or None when it holds no usable JSON object."""
    obj = dirty_json.json_parse_dirty(text)
    if not isinstance(obj, dict):
        return None
    raw_name = obj.get("tool_name", obj.get("tool"))
    if not isinstance(raw_name, str) or not raw_name.strip():
        return None
    args = obj.get("tool_args", obj.get("args"))
    if not isinstance(args, dict):
        args = {}
    name, _, method = raw_name.strip().partition(":")
    headline = obj.get("headline")
    return ToolRequest(
        name=name.strip(),
        method=method.strip() or None,
        args={str(k): v for k, v in args.items()},
        thoughts=obj.get("thoughts"),
        headline=headline if isinstance(headline, str) else "",
    )


def first_object_end(text: str) -> int | None:
    """Index just past the first complete root JSON object in `text`, else None.

    Braces inside quoted strings (", ' or `) are ignored; the slice must also parse
    as a complete object, so a reply can be cut right there while streaming.
    """
    start = text.find("{")
    if start < 0:
        return None
    depth = 0
    quote = ""
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            continue
        if ch in QUOTES:
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                value, complete = dirty_json.parse_with_status(text[start : i + 1])
                return i + 1 if complete and isinstance(value, dict) else None
    return None


def partial_object(text: str) -> dict | None:
    """The (possibly incomplete) object parsed so far, for streaming to the UI."""
    start = text.find("{")
    if start < 0:
        return None
    value, _ = dirty_json.parse_with_status(text[start:])
    return value if isinstance(value, dict) else None
