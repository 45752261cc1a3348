"""Paths of the code tree and the user folder; atomic writes."""

from __future__ import annotations

import os
import stat

import pytest

from python.helpers import files

pytestmark = pytest.mark.unit


def test_base_dir_is_the_repository_root():
    assert (files.BASE_DIR / "pyproject.toml").is_file()
    assert (files.BASE_DIR / "python" / "helpers" / "files.py").is_file()


def test_usr_dir_follows_env_and_is_created(tmp_path, monkeypatch):
    target = tmp_path / "a" / "usr"
    monkeypatch.setenv("A0_USR_DIR", str(target))
    assert files.usr_dir() == target
    assert target.is_dir()


def test_usr_dir_defaults_below_base(monkeypatch):
    monkeypatch.delenv("A0_USR_DIR")
    # Only compute the path: creating it in the working tree is what the fixture prevents.
    monkeypatch.setattr(files.Path, "mkdir", lambda *a, **k: None)
    assert files.usr_dir() == files.BASE_DIR / "usr"


def test_get_abs_path_stays_inside_base():
    assert files.get_abs_path("prompts", "x.md") == files.BASE_DIR / "prompts" / "x.md"
    assert files.get_abs_path() == files.BASE_DIR
    with pytest.raises(ValueError, match="escapes"):
        files.get_abs_path("..", "etc")
    with pytest.raises(ValueError, match="escapes"):
        files.get_abs_path("/etc/passwd")


def test_write_atomic_replaces_and_sets_mode(tmp_path):
    target = tmp_path / "sub" / "f.txt"
    files.write_atomic(target, "one")
    files.write_atomic(target, b"two", mode=0o600)
    assert target.read_text() == "two"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["f.txt"]


def test_read_text_default(tmp_path):
    assert files.read_text(tmp_path / "missing", default="") == ""
    with pytest.raises(FileNotFoundError):
        files.read_text(tmp_path / "missing")
