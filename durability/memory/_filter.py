"""The ``filter`` of memory search: a Python-like condition over a memory's metadata,
evaluated by simpleeval (as the prompt loader's ``{{if}}``), never ``eval``.

Names are the metadata keys plus ``id``, ``area`` and ``timestamp`` (local time,
``YYYY-MM-DD HH:MM:SS``, so timestamps compare as strings, as upstream). A filter that does
not parse is refused before anything is searched; one that fails on a memory (a name it
lacks, a wrong type) excludes that memory, as upstream does.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

import simpleeval

from durability.errors import InvalidArgument

MAX_FILTER_CHARS = 2_000

Accept = Callable[[Mapping[str, Any]], bool]


def compile_filter(expression: str | None) -> Accept | None:
    """A predicate over a memory's names, or None when there is no filter."""
    if expression is None or not str(expression).strip():
        return None
    if not isinstance(expression, str) or len(expression) > MAX_FILTER_CHARS:
        raise InvalidArgument(
            f"filter must be a text of at most {MAX_FILTER_CHARS} characters", field="filter"
        )
    evaluator = simpleeval.EvalWithCompoundTypes()
    try:
        parsed = evaluator.parse(expression.strip())
    except (SyntaxError, ValueError) as exc:
        raise InvalidArgument(f"filter does not parse: {exc}", field="filter") from None
    if not isinstance(parsed, ast.AST):  # pragma: no cover - simpleeval always gives a node
        raise InvalidArgument("filter does not parse", field="filter")

    def accept(names: Mapping[str, Any]) -> bool:
        evaluator.names = dict(names)
        try:
            return bool(evaluator.eval("", previously_parsed=parsed))
        except Exception:
            return False

    return accept
