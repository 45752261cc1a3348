"""Prompt files: lookup along profile folders and the Agent Zero template syntax.

Syntax: ``{{name}}`` (a variable; left as written when not given), ``{{ include "f.md" }}``
(searched in every folder, in order), ``{{ include original }}`` (the same file name further
down the search order), ``{{if <expression>}}...{{else}}...{{endif}}`` (nestable; the
expression is evaluated by simpleeval over the variables; a name not given is None).
Variable values are inserted as they are: text inside a value is never re-read as a tag.

As upstream: a file that is one fenced block (```` ```json ... ``` ````) loses its fences, and
in a ``json`` block every variable is inserted JSON-encoded, so the message stays valid JSON;
``<name>.py`` next to ``<name>.md`` (a :class:`python.helpers.files.VariablesPlugin`) supplies
variables for that file (the caller's variables win).
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import simpleeval

from python.helpers import files
from python.helpers.errors import CodedError

_TAG = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INCLUDE = re.compile(r"include\s+(?:\"([^\"]+)\"|'([^']+)'|(original))")
_IF = re.compile(r"if\s+(.+)", re.DOTALL)
_PROFILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_FENCE = re.compile(r"\A\s*```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)

#: Upstream's tool prompt file names whose tool is named differently here or there:
#: ``agent.system.tool.<alias>.md`` stands for the tool ``<name>``.
TOOL_PROMPT_ALIASES: dict[str, str] = {
    "call_sub": "call_subordinate",
    "code_exe": "code_execution_tool",
}
TOOL_PROMPT_PREFIX = "agent.system.tool."
VISION_TOOL = "vision_load"  # its prompt is offered only with chat_model_vision on
#: Functions an ``{{if}}`` expression may call (no clock or random: prompts stay
#: deterministic, or a resumed run would diverge from its journal).
IF_FUNCTIONS = {"len": len, "int": int, "float": float, "str": str, "bool": bool}
#: ``loop_data.params_temporary`` key: the values an extension put into this iteration's
#: prompt that a replay cannot reproduce (the current time). The journal digests the
#: messages with each of them replaced by VOLATILE_MARK (:func:`stable_view`).
VOLATILE_KEY = "volatile_prompt_values"
VOLATILE_MARK = "{{volatile}}"


class PromptError(CodedError):
    """A prompt that cannot be rendered; ``code`` is stable."""

    code = "prompt_error"


class PromptNotFound(PromptError):
    code = "prompt_not_found"


class PromptIncludeLoop(PromptError):
    code = "prompt_include_loop"


class PromptSyntaxError(PromptError):
    code = "prompt_syntax_error"


class PromptPluginError(PromptError):
    code = "prompt_plugin_error"


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


def tool_prompt_key(file_name: str) -> str:
    """The tool a ``agent.system.tool.<x>.md`` file describes (upstream aliases resolved)."""
    stem = file_name[len(TOOL_PROMPT_PREFIX) : -len(".md")]
    return TOOL_PROMPT_ALIASES.get(stem, stem)


def tool_prompt_files(dirs: list[Path]) -> list[str]:
    """One tool prompt file name per tool along ``dirs``: the first folder that has the
    tool's prompt under either name (ours or upstream's) wins; sorted by tool name."""
    chosen: dict[str, str] = {}
    for folder in dirs:
        folder = Path(folder)
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob(TOOL_PROMPT_PREFIX + "*.md")):
            chosen.setdefault(tool_prompt_key(path.name), path.name)
    return [chosen[key] for key in sorted(chosen)]


def render(name: str, dirs: list[Path], /, **variables: Any) -> str:
    """Render prompt file ``name`` found along ``dirs`` with ``variables``."""
    path, index = find(name, dirs)
    return _Renderer(list(dirs)).file(name, path, index, variables)


def render_text(text: str, dirs: list[Path] | None = None, /, **variables: Any) -> str:
    """Render template text that is not a file (includes are searched in ``dirs``)."""
    return _Renderer(list(dirs or [])).text(text, "<text>", -1, variables, encode=False)


# variable plugins ----------------------------------------------------------------------------
_plugins: dict[tuple[str, int], Any] = {}


def _plugin_names(name: str) -> list[str]:
    stem = name[: -len(".md")] if name.endswith(".md") else name
    names = [stem + ".py"]
    if stem.startswith(TOOL_PROMPT_PREFIX):  # upstream's file name <-> ours
        tool = stem[len(TOOL_PROMPT_PREFIX) :]
        for alias, canonical in TOOL_PROMPT_ALIASES.items():
            if tool == alias:
                names.append(TOOL_PROMPT_PREFIX + canonical + ".py")
            elif tool == canonical:
                names.append(TOOL_PROMPT_PREFIX + alias + ".py")
    return names


def _find_plugin(name: str, path: Path, dirs: list[Path]) -> Path | None:
    folders = [path.parent, *[Path(d) for d in dirs]]
    for plugin_name in _plugin_names(name):
        for folder in folders:
            candidate = folder / plugin_name
            if candidate.is_file():
                return candidate
    return None


def _load_plugin(path: Path) -> Any:
    stamp = path.stat().st_mtime_ns
    key = (str(path.resolve()), stamp)
    cached = _plugins.get(key)
    if cached is not None:
        return cached
    module_name = "_a0_prompt_plugin_" + re.sub(r"\W", "_", str(path.resolve()))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PromptPluginError(f"variable plugin {path.name} cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise PromptPluginError(f"variable plugin {path.name} failed to load: {exc}") from None
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and value.__module__ == module.__name__
            and callable(getattr(value, "get_variables", None))
        ):
            instance = value()
            _plugins[key] = instance
            return instance
    raise PromptPluginError(f"variable plugin {path.name} defines no get_variables class")


def plugin_variables(name: str, path: Path, dirs: list[Path]) -> dict[str, Any]:
    """The variables ``name``'s plugin supplies (empty when it has none)."""
    plugin_path = _find_plugin(name, path, dirs)
    if plugin_path is None:
        return {}
    plugin = _load_plugin(plugin_path)
    try:
        found = plugin.get_variables(str(path), [str(d) for d in dirs])
    except Exception as exc:
        raise PromptPluginError(f"variable plugin {plugin_path.name} failed: {exc}") from None
    if not isinstance(found, dict):
        raise PromptPluginError(f"variable plugin {plugin_path.name} must return a dict")
    return found


# rendering ----------------------------------------------------------------------------------
class _Names(dict):
    """Variables for an ``{{if}}`` expression: a name that was not given is None."""

    def __missing__(self, key: str) -> None:
        return None


def _truthy(expression: str, variables: dict[str, Any], name: str) -> bool:
    if _IDENT.fullmatch(expression):
        return bool(variables.get(expression))
    evaluator = simpleeval.EvalWithCompoundTypes(names=_Names(variables), functions=IF_FUNCTIONS)
    try:
        return bool(evaluator.eval(expression))
    except (TypeError, ValueError, ArithmeticError, LookupError):
        return False  # e.g. `"a" in x` with x not given: the condition does not hold
    except (simpleeval.InvalidExpression, SyntaxError) as exc:
        message = f"{name}: '{{{{if {expression}}}}}' cannot be evaluated: {exc}"
        raise PromptSyntaxError(message) from None


@dataclass
class _Renderer:
    dirs: list[Path]
    stack: list[Path] = field(default_factory=list)

    def file(self, name: str, path: Path, index: int, variables: dict[str, Any]) -> str:
        resolved = path.resolve()
        if resolved in self.stack:
            chain = " -> ".join(p.name for p in [*self.stack, resolved])
            raise PromptIncludeLoop(f"prompt include loop: {chain}")
        self.stack.append(resolved)
        try:
            merged = {**plugin_variables(name, path, self.dirs), **variables}
            text = path.read_text(encoding="utf-8")
            fence = _FENCE.match(text)
            if fence:  # a file that is one fenced block: fences go, json values are encoded
                text = fence.group(2)
                encode = fence.group(1).lower() == "json"
                return self.text(text, name, index, merged, encode=encode)
            return self.text(text, name, index, merged, encode=False)
        finally:
            self.stack.pop()

    def text(
        self, text: str, name: str, index: int, variables: dict[str, Any], *, encode: bool
    ) -> str:
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
                truthy = emitting and _truthy(if_match.group(1).strip(), variables, name)
                frames.append([truthy, emitting, False])
                emitting = truthy
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
                out.append(self.tag(body, match.group(0), name, index, variables, encode))
        if frames:
            raise PromptSyntaxError(f"{name}: '{{{{if}}}}' without '{{{{endif}}}}'")
        if emitting:
            out.append(text[pos:])
        return "".join(out)

    def tag(
        self, body: str, raw: str, name: str, index: int, variables: dict[str, Any], encode: bool
    ) -> str:
        include = _INCLUDE.fullmatch(body)
        if include:
            if include.group(3):
                if index < 0:
                    raise PromptNotFound(f"{name}: 'include original' needs a prompt file")
                path, found = find(name, self.dirs, index + 1)
                return self.file(name, path, found, variables)
            target = include.group(1) or include.group(2)
            path, found = find(target, self.dirs)
            return self.file(target, path, found, variables)
        if _IDENT.fullmatch(body) and body in variables:
            value = variables[body]
            if encode:
                return json.dumps(value, ensure_ascii=False, default=str)
            return _as_text(value)
        return raw  # unknown variable or not a tag: left as written


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def tools_prompt(agent: Any) -> str:
    """The rendered tools section of ``agent``'s system prompt (agent.system.tools.md with
    every tool prompt); fw.tool_not_found.md gets it as ``tools_prompt`` too."""
    names = tool_prompt_files(agent.config.prompts_dirs)
    settings = getattr(agent.config, "settings", None) or {}
    if not settings.get("chat_model_vision", True):  # as upstream: no vision,
        names = [n for n in names if tool_prompt_key(n) != VISION_TOOL]  # no vision_load
    parts = [agent.read_prompt(name) for name in names]
    return str(agent.read_prompt("agent.system.tools.md", tools="\n\n".join(parts)))


def stable_view(value: Any, volatile: list[str] | tuple[str, ...]) -> Any:
    """``value`` (messages: strings, lists, dicts) with every volatile text replaced by
    VOLATILE_MARK: what a resumed run can rebuild exactly."""
    texts = sorted({v for v in volatile if isinstance(v, str) and v}, key=len, reverse=True)
    if not texts:
        return value

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            for text in texts:
                item = item.replace(text, VOLATILE_MARK)
            return item
        if isinstance(item, list):
            return [walk(x) for x in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    return walk(value)
