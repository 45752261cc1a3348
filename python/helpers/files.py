"""Paths of the code tree and the user data folder, and small file helpers."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

BASE_DIR: Path = Path(__file__).resolve().parents[2]
"""The repository root (where agent.py lives)."""


def usr_dir() -> Path:
    """The user data folder: ``A0_USR_DIR`` if set, else ``BASE_DIR/usr``; created on demand."""
    configured = os.environ.get("A0_USR_DIR")
    path = Path(configured).expanduser() if configured else BASE_DIR / "usr"
    path.mkdir(parents=True, exist_ok=True)
    return path


def get_abs_path(*parts: str) -> Path:
    """A path below ``BASE_DIR``; absolute parts or ``..`` that escape it are refused."""
    path = BASE_DIR.joinpath(*parts).resolve()
    if path != BASE_DIR and BASE_DIR not in path.parents:
        raise ValueError(f"path escapes the code tree: {'/'.join(parts)}")
    return path


def read_text(path: Path | str, default: str | None = None) -> str:
    """The file's text (UTF-8); ``default`` when it does not exist and a default is given."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        if default is None:
            raise
        return default


def write_atomic(path: Path | str, data: str | bytes, mode: int | None = None) -> None:
    """Write via a temporary file in the same folder, fsync, then ``os.replace``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class VariablesPlugin:
    """Base of a prompt's variable plugin: ``<prompt name>.py`` next to ``<prompt name>.md``
    defines a subclass whose ``get_variables`` supplies that prompt's variables (the
    Agent Zero convention; python/helpers/prompts.py loads it)."""

    def get_variables(self, file: str, backup_dirs: list[str] | None = None) -> dict:
        raise NotImplementedError
