"""Prompt files: lookup along profile folders and the Agent Zero template syntax.

Syntax: ``{{name}}`` (a variable; left as written when not given), ``{{ include "f.md" }}``
(searched in every folder, in order), ``{{ include original }}`` (the same file name further
down the search order), ``{{if name}}...{{else}}...{{endif}}`` (truthy variable, nestable).
Variable values are inserted as they are: text inside a value is never re-read as a tag.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from python.helpers import files

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INCLUDE = re.compile(r"include\s+(?:\"([^\"]+)\"|'([^']+)'|(original))")
_IF = re.compile(r"if\s+([A-Za-z_][A-Za-z0-9_]*)")
_PROFILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class PromptError(Exception):
    """A prompt that cannot be rendered; ``code`` is stable."""

    code = "prompt_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


class PromptNotFound(PromptError):
    code = "prompt_not_found"


class PromptIncludeLoop(PromptError):
    code = "prompt_include_loop"


class PromptSyntaxError(PromptError):
    code = "prompt_syntax_error"


def prompt_dirs(profile: str | None) -> list[Path]:
    """Search order: ``usr/agents/<p>/prompts``, ``agents/<p>/prompts``, ``prompts/``."""
    root = files.BASE_DIR / "prompts"
    if not profile:
        return [root]
    if not _PROFILE.fullmatch(profile) or ".." in profile:
        raise PromptError(f"invalid agent profile name '{profile}'")
    return [
        files.usr_dir() / "agents" / profile / "prompts",
        files.BASE_DIR / "agents" / profile / "prompts",
        root,
    ]


def find(name: str, dirs: list[Path], start: int = 0) -> tuple[Path, int]:
    """The first ``name`` in ``dirs[start:]`` and the index of its folder."""
    if not name or Path(name).is_absolute() or ".." in Path(name).parts:
        raise PromptNotFound(f"invalid prompt name '{name}'")
    for index in range(start, len(dirs)):
        path = Path(dirs[index]) / name
        if path.is_file():
            return path, index
    raise PromptNotFound(f"prompt '{name}' not found")


def render(name: str, dirs: list[Path], /, **variables: Any) -> str:
    """Render prompt file ``name`` found along ``dirs`` with ``variables``."""
    path, index = find(name, dirs)
    return _Renderer(list(dirs), variables).file(name, path, index)


def render_text(text: str, dirs: list[Path] | None = None, /, **variables: Any) -> str:
    """Render template text that is not a file (includes are searched in ``dirs``)."""
    return _Renderer(list(dirs or []), variables).text(text, "<text>", -1)


@dataclass
class _Renderer:
    dirs: list[Path]
    variables: dict[str, Any]
    stack: list[Path] = field(default_factory=list)

    def file(self, name: str, path: Path, index: int) -> str:
        resolved = path.resolve()
        if resolved in self.stack:
            chain = " -> ".join(p.name for p in [*self.stack, resolved])
            raise PromptIncludeLoop(f"prompt include loop: {chain}")
        self.stack.append(resolved)
        try:
            return self.text(path.read_text(encoding="utf-8"), name, index)
        finally:
            self.stack.pop()

    def text(self, text: str, name: str, index: int) -> str:
        out: list[str] = []
        # each frame: [emitting?, parent emitting?, seen else?]
        frames: list[list[bool]] = []
        emitting = True
        pos = 0
        for match in _TAG.finditer(text):
            if emitting:
                out.append(text[pos : match.start()])
            pos = match.end()
            body = match.group(1).strip()
            if_match = _IF.fullmatch(body)
            if if_match:
                truthy = bool(self.variables.get(if_match.group(1)))
                frames.append([emitting and truthy, emitting, False])
                emitting = emitting and truthy
            elif body == "else":
                if not frames or frames[-1][2]:
                    raise PromptSyntaxError(f"{name}: '{{{{else}}}}' without '{{{{if}}}}'")
                frame = frames[-1]
                frame[2] = True
                emitting = frame[1] and not frame[0]
            elif body == "endif":
                if not frames:
                    raise PromptSyntaxError(f"{name}: '{{{{endif}}}}' without '{{{{if}}}}'")
                emitting = frames.pop()[1]
            elif emitting:
                out.append(self.tag(body, match.group(0), name, index))
        if frames:
            raise PromptSyntaxError(f"{name}: '{{{{if}}}}' without '{{{{endif}}}}'")
        if emitting:
            out.append(text[pos:])
        return "".join(out)

    def tag(self, body: str, raw: str, name: str, index: int) -> str:
        include = _INCLUDE.fullmatch(body)
        if include:
            if include.group(3):
                if index < 0:
                    raise PromptNotFound(f"{name}: 'include original' needs a prompt file")
                path, found = find(name, self.dirs, index + 1)
                return self.file(name, path, found)
            target = include.group(1) or include.group(2)
            path, found = find(target, self.dirs)
            return self.file(target, path, found)
        if _IDENT.fullmatch(body) and body in self.variables:
            return _as_text(self.variables[body])
        return raw  # unknown variable or not a tag: left as written


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False)
    return str(value)
