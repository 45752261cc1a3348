"""Secret masking for the agent: values from the environment, usr/.env and usr/secrets.env."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.masking import Masker, collect_secrets, placeholder
from python.helpers import files

__all__ = [
    "SECRETS_FILE",
    "Masker",
    "mask",
    "masker_for",
    "placeholder",
    "set_extra_secrets",
    "unmask",
]

SECRETS_FILE = "secrets.env"
_cache: dict[tuple, Masker] = {}
_extra: dict[str, dict[str, str]] = {}  # group -> {name: value}, e.g. MCP server credentials
_extra_version = 0


def set_extra_secrets(group: str, values: Mapping[str, str]) -> None:
    """Secrets that live in no file the masker reads (MCP server env and headers come from
    the ``mcp_servers`` setting): ``values`` replaces the group's earlier set."""
    global _extra_version
    cleaned = {k: v for k, v in values.items() if isinstance(v, str) and v}
    if _extra.get(group, {}) != cleaned:
        _extra[group] = cleaned
        _extra_version += 1


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size


def masker_for(usr: Path | None = None, environ: Mapping[str, str] | None = None) -> Masker:
    """A Masker for every secret known now: environment, usr/.env keys, usr/secrets.env and
    the extra secrets registered with :func:`set_extra_secrets`."""
    folder = Path(usr) if usr is not None else files.usr_dir()
    env = os.environ if environ is None else environ
    env_file, secrets_file = folder / ".env", folder / SECRETS_FILE
    key = (
        str(folder),
        _stamp(env_file),
        _stamp(secrets_file),
        hash(frozenset((k, v) for k, v in env.items() if isinstance(v, str))),
        _extra_version,
    )
    masker = _cache.get(key)
    if masker is None:
        found = collect_secrets(env, env_files=[env_file], secrets_files=[secrets_file])
        for group in sorted(_extra):
            found.update(_extra[group])
        masker = Masker(found)
        _cache.clear()
        _cache[key] = masker
    return masker


def mask(value: Any, usr: Path | None = None) -> Any:
    """``value`` with every known secret replaced by ``§§secret(NAME)``."""
    return masker_for(usr).mask(value)


def unmask(value: Any, usr: Path | None = None) -> Any:
    """``value`` with every ``§§secret(NAME)`` of a known secret replaced by its value."""
    return masker_for(usr).unmask(value)


_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


def names_listing(usr: Path | None = None) -> str:
    """usr/secrets.env as the agent may see it: each ``NAME=value`` line as the alias
    ``§§secret(NAME)`` (never the value), comment lines kept (they say what a secret is
    for), other lines and blank runs dropped. Empty when there is no such file."""
    folder = Path(usr) if usr is not None else files.usr_dir()
    try:
        text = (folder / SECRETS_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    lines: list[str] = []
    for line in text.splitlines():
        match = _ASSIGNMENT.match(line)
        if match:
            lines.append(placeholder(match.group(1)))
        elif line.strip().startswith("#"):
            lines.append(line.strip())
    return "\n".join(lines) if any(not ln.startswith("#") for ln in lines) else ""
