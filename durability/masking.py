"""Secret masking: every secret value becomes ``§§secret(NAME)`` before anything is written."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values

MIN_SECRET_LENGTH = 4

#: Environment / .env names whose values are secrets (matched case-insensitively).
SECRET_NAME_PATTERNS: tuple[str, ...] = (
    "API_KEY_*",
    "*_API_KEY",
    "*_API_TOKEN",
    "*_PASSWORD",
    "*_SECRET",
    "*_TOKEN",
    "AUTH_PASSWORD",
)


def placeholder(name: str) -> str:
    return f"§§secret({name})"


PLACEHOLDER = re.compile(r"§§secret\(([A-Za-z_][A-Za-z0-9_]*)\)")


class Masker:
    """Replaces secret values (longest first) in strings, recursively through dicts and lists."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        by_value: dict[str, str] = {}
        for name in sorted(secrets or {}):
            value = (secrets or {})[name]
            if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH:
                by_value.setdefault(value, name)
        self._names = sorted(set(by_value.values()))
        self._by_value = by_value
        self._by_name = {name: value for value, name in by_value.items()}
        ordered = sorted(by_value, key=lambda v: (-len(v), v))
        # a placeholder is matched first and kept whole: masking masked text changes nothing,
        # even when a secret value occurs inside a placeholder ("secret", "cret(")
        alternatives = [PLACEHOLDER.pattern, *(re.escape(v) for v in ordered)]
        self._pattern = re.compile("|".join(alternatives)) if ordered else None

    @property
    def names(self) -> list[str]:
        """Names of the secrets this masker hides (never their values)."""
        return list(self._names)

    def __repr__(self) -> str:
        return f"Masker(names={self._names!r})"

    def mask_text(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(self._replace, text)

    def _replace(self, match: re.Match[str]) -> str:
        name = self._by_value.get(match.group(0))
        return match.group(0) if name is None else placeholder(name)

    def mask_stream(self, text: str) -> str:
        """``text`` masked, less a tail that could be the start of a secret: what a stream
        may show now (the rest of the text arrives later and is masked then)."""
        return self.hold_back(self.mask_text(text))

    def hold_back(self, masked: str) -> str:
        """Masked text less its longest tail that is the start of a secret value."""
        if self._pattern is None or not masked:
            return masked
        keep = len(masked)
        last = masked[-1]
        for value in self._by_value:
            if last not in value[:-1]:
                continue  # no start of this value ends with that character
            for size in range(min(len(value) - 1, len(masked)), 0, -1):
                if masked.endswith(value[:size]):
                    keep = min(keep, len(masked) - size)
                    break
        return masked[:keep]

    def same_secrets(self, other: Masker) -> bool:
        """Both hide the same values under the same names."""
        return self._by_value == other._by_value

    def mask(self, value: Any) -> Any:
        """A masked copy of ``value``: str, dict (keys and values), list and tuple are walked."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, Mapping):
            return {
                (self.mask_text(k) if isinstance(k, str) else k): self.mask(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.mask(v) for v in value]
        return value

    def unmask(self, value: Any) -> Any:
        """The inverse of mask for known names: ``§§secret(NAME)`` becomes the value again.

        Tools get real values (a replayed, masked model reply still runs the same command);
        placeholders of unknown names stay as they are.
        """
        if isinstance(value, str):
            if "§§secret(" not in value:
                return value
            return PLACEHOLDER.sub(lambda m: self._by_name.get(m.group(1), m.group(0)), value)
        if isinstance(value, Mapping):
            return {k: self.unmask(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.unmask(v) for v in value]
        return value


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_NAME_PATTERNS)


def _read_dotenv(path: Path) -> dict[str, str]:
    return {k: v for k, v in read_env_file(path).items() if v}


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of a ``.env``-style file, each value exactly as written: python-dotenv's
    ``${VAR}`` expansion is off, so a saved ``${AUTH_PASSWORD}`` never reads back as the
    password (docs/configuration.md). Empty when the file does not exist."""
    if not Path(path).is_file():
        return {}
    values = dotenv_values(path, interpolate=False)
    return {k: v for k, v in values.items() if isinstance(v, str)}


def collect_secrets(
    environ: Mapping[str, str],
    env_files: list[Path],
    secrets_files: list[Path],
) -> dict[str, str]:
    """Secret name -> value: every key of secrets.env files, then API keys and passwords from
    .env files, then from ``environ`` (later sources win for the same name). Missing files are
    skipped."""
    found: dict[str, str] = {}
    for path in secrets_files:
        found.update(_read_dotenv(Path(path)))
    for path in env_files:
        found.update({k: v for k, v in _read_dotenv(Path(path)).items() if is_secret_name(k)})
    found.update({k: v for k, v in environ.items() if v and is_secret_name(k)})
    return found
