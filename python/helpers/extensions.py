"""Extension points: ``<folder>/<point>/*.py`` files with Extension subclasses, run in order.

Folders, highest priority first: ``usr/agents/<profile>/extensions``,
``agents/<profile>/extensions``, ``python/extensions``. The first file of a given name
wins (so a profile overrides a default by reusing its file name); the winners run sorted
by file name (``_10_...`` before ``_90_...``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from python.helpers import files
from python.helpers.errors import CodedError
from python.helpers.extension import Extension

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent

__all__ = ["Extension", "ExtensionError", "call_extensions", "call_extensions_sync"]

_POINT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")


class ExtensionError(CodedError):
    """An extension file that cannot be loaded or run at its point; ``code`` is stable."""

    code = "extension_error"


_modules: dict[Path, tuple[int, list[type[Extension]]]] = {}


def _profile(agent: Agent | None) -> str | None:
    return agent.config.profile or None if agent is not None else None


def extension_dirs(point: str, profile: str | None) -> list[Path]:
    """The folders searched for ``point``, highest priority first."""
    if not _POINT.fullmatch(point) or ".." in point:
        raise ExtensionError(f"invalid extension point '{point}'")
    dirs: list[Path] = []
    if profile and "/" not in profile and ".." not in profile:
        dirs.append(files.usr_dir() / "agents" / profile / "extensions" / point)
        dirs.append(files.BASE_DIR / "agents" / profile / "extensions" / point)
    dirs.append(files.BASE_DIR / "python" / "extensions" / point)
    return dirs


def extension_files(point: str, profile: str | None = None) -> list[Path]:
    """The files that run at ``point``: first of each name wins, sorted by file name."""
    chosen: dict[str, Path] = {}
    for folder in extension_dirs(point, profile):
        if folder.is_dir():
            for path in folder.glob("*.py"):
                if not path.name.startswith("__"):
                    chosen.setdefault(path.name, path)
    return [chosen[name] for name in sorted(chosen)]


def _load(path: Path) -> list[type[Extension]]:
    """Extension classes defined in ``path`` (cached until the file changes)."""
    stamp = path.stat().st_mtime_ns
    cached = _modules.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    module_name = f"_a0_extension_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ExtensionError(f"extension file cannot be loaded: {path.name}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(module_name, None)
        raise ExtensionError(
            f"extension {path.parent.name}/{path.name} failed to load: {type(exc).__name__}: {exc}"
        ) from exc
    classes = [
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, Extension)
        and obj is not Extension
        and obj.__module__ == module_name
    ]
    _modules[path] = (stamp, classes)
    return classes


def _instances(point: str, agent: Any) -> list[Extension]:
    return [cls(agent) for path in extension_files(point, _profile(agent)) for cls in _load(path)]


async def call_extensions(point: str, agent: Any = None, **kwargs: Any) -> None:
    """Run every extension at ``point`` in order, awaiting async ones."""
    for extension in _instances(point, agent):
        result = extension.execute(**kwargs)
        if inspect.isawaitable(result):
            await result


def call_extensions_sync(point: str, agent: Any = None, **kwargs: Any) -> None:
    """Run the extensions of a synchronous point; an async extension there is an error
    when an event loop is running (it cannot be awaited), else it runs to completion."""
    for extension in _instances(point, agent):
        result = extension.execute(**kwargs)
        if inspect.iscoroutine(result):
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                asyncio.run(result)
                continue
            result.close()
            raise ExtensionError(
                f"extension {type(extension).__name__} at sync point '{point}' must not be async"
            )
