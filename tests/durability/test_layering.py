"""durability/ imports nothing from the agent (agent.py, python/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "durability"
FORBIDDEN = ("agent", "python", "run_ui")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_durability_does_not_import_the_agent():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in imported_modules(path):
            if name.split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(PACKAGE.parent)}: {name}")
    assert not offenders, offenders


SQL_START = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|PRAGMA|BEGIN|COMMIT|ROLLBACK|CREATE)\b")


def test_sql_lives_only_in_the_store():
    """Outside durability/store/ no module runs a statement or holds SQL text."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "store") in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                statement = node.args[0] if node.args else None
                if node.func.attr in ("execute", "executemany", "executescript") and isinstance(
                    statement, ast.Constant | ast.JoinedStr
                ):
                    offenders.append(f"{where}:{node.lineno}: .{node.func.attr}(<SQL>)")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL_START.match(node.value)
            ):
                offenders.append(f"{where}:{node.lineno}: {node.value[:40]!r}")
    assert not offenders, offenders
