"""The safe-replay allowlist: every pin must match the file it pins."""

from __future__ import annotations

import hashlib

import pytest

from durability import replay

pytestmark = pytest.mark.unit


def test_only_intended_tools_are_pinned():
    extra = sorted(set(replay.SAFE_REPLAY) - set(replay.INTENDED_SAFE_TOOLS))
    assert not extra, f"tools pinned as safe that may never be: {extra}"


def test_every_pinned_file_exists():
    missing = [
        str(replay.tool_source_path(name).relative_to(replay.REPO_ROOT))
        for name in replay.SAFE_REPLAY
        if not replay.tool_source_path(name).is_file()
    ]
    assert not missing, f"pinned tool source files are missing: {missing}"


def test_every_pin_matches_its_file():
    changed = []
    for name, pinned in replay.SAFE_REPLAY.items():
        actual = replay.source_digest(replay.tool_source_path(name))
        if actual != pinned:
            changed.append(f"{name}: pinned {pinned[:12]}..., file is {str(actual)[:12]}...")
    assert not changed, (
        "a safe-replay tool changed without its pin being updated; review the change, then "
        f"update durability/replay.py (see its module comment): {changed}"
    )


def test_is_safe_checks_the_hash(tmp_path, monkeypatch):
    source = tmp_path / "response.py"
    source.write_text("print('reviewed')\n")
    pin = hashlib.sha256(source.read_bytes()).hexdigest()
    monkeypatch.setattr(replay, "SAFE_REPLAY", {"response": pin})
    assert replay.is_safe("response", source) is True
    assert replay.is_safe("code_execution_tool", source) is False
    source.write_text("print('changed')\n")
    assert replay.is_safe("response", source) is False
    assert replay.is_safe("response", tmp_path / "missing.py") is False


def test_unlisted_tools_are_never_safe():
    for name in ("code_execution_tool", "input", "text_editor", "unknown"):
        assert replay.is_safe(name, replay.tool_source_path(name)) is False


def test_the_reviewed_tools_are_safe_as_they_stand():
    for name in replay.SAFE_REPLAY:
        assert replay.is_safe(name, replay.tool_source_path(name)), name
