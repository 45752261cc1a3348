"""A tolerant JSON reader for model output ("dirty JSON").

Accepts what models tend to write: single, back- and triple-quoted strings, unquoted keys
and values, trailing or missing commas, ``//`` and ``/* */`` comments, text around the
value, a ``{{ ... }}`` wrapper, ``undefined``/``None``/``True``, bad ``\\u`` escapes, and
truncated input (the partial value comes back with ``completed=False``). Never raises.
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_LITERALS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
    "undefined": None,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}
_QUOTES = "\"'`"
_FENCE = re.compile(r"```[\w+-]*[ \t]*\r?\n")
_MAX_DEPTH = 400
_END = object()  # no value could start here


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.complete = True
        self.depth = 0

    # low level -------------------------------------------------------------
    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip_blank(self) -> None:
        """Skip whitespace and comments."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char.isspace():
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = len(text) if end < 0 else end + 2
            else:
                return

    # values --------------------------------------------------------------
    def value(self) -> Any:
        """Read one value at the current position (after blanks); ``_END`` if none starts."""
        self.skip_blank()
        if self.at_end():
            self.complete = False
            return _END
        char = self.text[self.pos]
        if char == "{":
            return self.nested(self.obj)
        if char == "[":
            return self.nested(self.array)
        if char in _QUOTES:
            return self.string()
        if char == "-" or char == "." or char.isdigit():
            return self.number()
        return self.bare_word()

    def nested(self, reader: Any) -> Any:
        if self.depth >= _MAX_DEPTH:
            self.complete = False
            self.pos = len(self.text)
            return None
        self.depth += 1
        try:
            return reader()
        finally:
            self.depth -= 1

    def next_item(self, closer: str, skipped: str) -> bool:
        """Move to the next item of an object or list, over blanks and ``skipped``
        characters; False when the container ends (``closer`` consumed, or the text ended:
        then the value is incomplete)."""
        while True:
            self.skip_blank()
            if self.at_end():
                self.complete = False
                return False
            char = self.text[self.pos]
            if char == closer:
                self.pos += 1
                return False
            if char not in skipped:
                return True
            self.pos += 1

    def obj(self) -> dict:
        self.pos += 1  # "{"
        result: dict = {}
        while True:
            if not self.next_item("}", ",;"):
                return result
            if self.text[self.pos] == "{" and not result:
                return self.double_braced()
            key = self.key()
            if key is _END:
                self.complete = False
                return result
            self.skip_blank()
            if self.peek() in (":", "="):
                self.pos += 1
            elif self.at_end():
                self.complete = False
                return result
            value = self.value()
            if value is _END:
                return result
            result[key] = value

    def double_braced(self) -> Any:
        """``{{ ... }}``: the inner value stands for the whole."""
        inner = self.obj()
        self.skip_blank()
        if self.peek() == "}":
            self.pos += 1
        else:
            self.complete = False
        return inner

    def key(self) -> Any:
        char = self.text[self.pos]
        if char in _QUOTES:
            return str(self.string())
        start = self.pos
        while (
            not self.at_end()
            and self.text[self.pos] not in ":=,}\n"
            and not (self.text[self.pos].isspace())
        ):
            self.pos += 1
        if self.at_end():
            self.complete = False
            return _END
        if self.pos == start:  # a stray character: skip it
            self.pos += 1
            return self.key() if not self.at_end() else _END
        return self.text[start : self.pos]

    def array(self) -> list:
        self.pos += 1  # "["
        result: list = []
        while True:
            if not self.next_item("]", ",}"):  # "}" in a list: a stray closer, skipped
                return result
            value = self.value()
            if value is _END:
                return result
            result.append(value)

    def string(self) -> str:
        text = self.text
        quote = text[self.pos]
        if text.startswith(quote * 3, self.pos):
            quote *= 3
        self.pos += len(quote)
        parts: list[str] = []
        while True:
            close = text.find(quote, self.pos)
            backslash = text.find("\\", self.pos, None if close < 0 else close)
            if backslash >= 0:
                parts.append(text[self.pos : backslash])
                self.pos = backslash
                parts.append(self.escape())
            elif close >= 0:
                parts.append(text[self.pos : close])
                self.pos = close + len(quote)
                return "".join(parts)
            else:
                parts.append(text[self.pos :])
                self.pos = len(text)
                self.complete = False
                return "".join(parts)

    def escape(self) -> str:
        text = self.text
        self.pos += 1  # backslash
        if self.pos >= len(text):
            return ""
        char = text[self.pos]
        self.pos += 1
        if char == "u":
            digits = text[self.pos : self.pos + 4]
            if len(digits) == 4 and all(c in "0123456789abcdefABCDEF" for c in digits):
                self.pos += 4
                code = int(digits, 16)
                if 0xD800 <= code < 0xDC00 and text.startswith("\\u", self.pos):
                    low = text[self.pos + 2 : self.pos + 6]
                    if len(low) == 4 and all(c in "0123456789abcdefABCDEF" for c in low):
                        low_code = int(low, 16)
                        if 0xDC00 <= low_code < 0xE000:
                            self.pos += 6
                            return chr(0x10000 + ((code - 0xD800) << 10) + (low_code - 0xDC00))
                return chr(code)
            return "\\u"  # a bad escape stays as written
        return _ESCAPES.get(char, char)

    def number(self) -> Any:
        if self.text.startswith("-Infinity", self.pos):
            self.pos += len("-Infinity")
            return float("-inf")
        match = _NUMBER.match(self.text, self.pos)
        if match is None:  # a lone "-" or "."
            self.pos += 1
            if self.at_end():
                self.complete = False
                return _END
            return self.value()
        self.pos = match.end()
        raw = match.group()
        if self.at_end():
            self.complete = self.complete and raw[-1].isdigit()
        if re.fullmatch(r"-?\d+", raw):
            return int(raw)
        try:
            return float(raw)
        except ValueError:
            return None

    def bare_word(self) -> Any:
        """A literal (true, null, undefined, ...) or an unquoted string value."""
        text = self.text
        for word, literal in _LITERALS.items():
            if text.startswith(word, self.pos):
                after = self.pos + len(word)
                if after >= len(text) or not (text[after].isalnum() or text[after] == "_"):
                    self.pos = after
                    return literal
        start = self.pos
        while self.pos < len(text) and text[self.pos] not in ",}]\n":
            self.pos += 1
        raw = text[start : self.pos].strip()
        if self.pos >= len(text):
            self.complete = False
            for word, literal in _LITERALS.items():
                if raw and word.startswith(raw):
                    return literal
        return raw


def _value_starts(text: str) -> bool:
    stripped = text.lstrip()
    if not stripped:
        return False
    char = stripped[0]
    if char in "{[" or char in _QUOTES or char == "-" or char.isdigit():
        return True
    return bool(re.match(r"(true|false|null|None|True|False|undefined|NaN|Infinity)\b", stripped))


def parse_with_status(text: str) -> tuple[Any, bool]:
    """The value in ``text`` and whether the input held it completely."""
    try:
        if not isinstance(text, str):
            return None, False
        reader = _Reader(text)
        reader.skip_blank()
        fence = _FENCE.match(text, reader.pos)
        if fence:  # a Markdown code fence around the value
            reader.pos = fence.end()
            reader.skip_blank()
        if not _value_starts(text[reader.pos :]):
            starts = [i for i in (text.find("{", reader.pos), text.find("[", reader.pos)) if i >= 0]
            if not starts:
                return None, False
            reader.pos = min(starts)
        value = reader.value()
        if value is _END:
            return None, False
        if not isinstance(value, dict | list):
            # prose that starts like a value ("None of this...", "2 options: {...}")
            reader.skip_blank()
            later = [i for i in (text.find("{", reader.pos), text.find("[", reader.pos)) if i >= 0]
            if later:
                return parse_with_status(text[min(later) :])
        return value, reader.complete
    except Exception:  # a tolerant reader never raises; the input is simply unusable
        return None, False


def parse(text: str) -> Any:
    """The value in ``text``, or None when nothing parses."""
    return parse_with_status(text)[0]


def json_parse_dirty(text: str) -> dict | None:
    """The object from the first ``{`` to the last ``}`` (or the end when truncated)."""
    if not isinstance(text, str):
        return None
    start = text.find("{")
    if start < 0:
        return None
    end = text.rfind("}")
    value = parse(text[start : end + 1] if end > start else text[start:])
    return value if isinstance(value, dict) else None
