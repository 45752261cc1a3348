"""The tree stays lint-clean, formatted, and type-checked (the whole project)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


def test_ruff_check_is_clean():
    done = _run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean():
    done = _run("ruff", "format", "--no-cache", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_on_the_whole_project():
    """agent.py, run_ui.py, python/ and durability/ (pyproject.toml [tool.mypy] files)."""
    done = _run("mypy", "--no-incremental", "--cache-dir", "/dev/null")
    assert done.returncode == 0, done.stdout + done.stderr


MAX_LINES = 500
SKIPPED_DIRS = {
    ".venv",
    ".venv-peers",
    ".git",
    "node_modules",
    "usr",
    "vendor",
}  # .venv-peers: bench/setup_peers.sh


def _project_python_files() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts)
    ]


def test_no_python_file_passes_the_line_cap_or_skips_the_formatter():
    """Files stay under 500 lines (split by responsibility) and nobody opts out of ruff
    format with a ``fmt: skip`` or ``fmt: off`` marker."""
    too_long, opted_out = [], []
    marker = "# fmt: " + "skip", "# fmt: " + "off"
    for path in _project_python_files():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES:
            too_long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
        if any(m in text for m in marker):
            opted_out.append(str(path.relative_to(ROOT)))
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"
    assert not opted_out, f"formatter markers in: {opted_out}"
