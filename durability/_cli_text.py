"""What the operator commands (durability/cli.py) print and how they read numbers."""

from __future__ import annotations

import argparse
import getpass
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

N = TypeVar("N", int, float)


def login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "operator"


def when(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def dump(out: TextIO, value: Any) -> None:
    out.write(json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2) + "\n")


def table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    if not rows:
        out.write("(none)\n")
        return
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        out.write("  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


def positive_int(text: str) -> int:
    value = non_negative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be an integer >= 1")
    return value


def non_negative_int(text: str) -> int:
    value = _parsed(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def non_negative_float(text: str) -> float:
    value = _parsed(text, float, "a number")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError("must be a finite number >= 0")
    return value


def _parsed(text: str, parse: Callable[[str], N], what: str) -> N:
    try:
        return parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
