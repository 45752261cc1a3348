"""Private stand-ins for helper modules that have not landed yet (test use only).

install() registers a stand-in only for a module that does not exist in the tree, so
the real helpers take over as soon as they land. Delete this file then.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import sys
import types
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from python.helpers import files


def _settings() -> types.ModuleType:
    m = types.ModuleType("python.helpers.settings")
    m.DEFAULTS = {
        "chat_model_ctx_length": 128000,
        "chat_model_ctx_history": 0.7,
        "agent_profile": "agent0",
        "code_exec_first_output_timeout": 30,
        "code_exec_between_output_timeout": 15,
        "code_exec_max_timeout": 180,
    }
    m.get_api_key = lambda provider, usr=None, environ=None: None
    return m


def _prompts() -> types.ModuleType:
    m = types.ModuleType("python.helpers.prompts")

    class PromptNotFound(Exception):
        code = "prompt_not_found"

    def prompt_dirs(profile: str | None) -> list[Path]:
        dirs = []
        if profile:
            dirs += [files.usr_dir() / "agents" / profile / "prompts"]
            dirs += [files.BASE_DIR / "agents" / profile / "prompts"]
        return [*dirs, files.BASE_DIR / "prompts"]

    def _find(name: str, dirs: list[Path]) -> tuple[Path, int]:
        for i, d in enumerate(dirs):
            if (d / name).is_file():
                return d / name, i
        raise PromptNotFound(name)

    def _render_file(name: str, dirs: list[Path], variables: dict) -> str:
        path, i = _find(name, dirs)
        text = path.read_text(encoding="utf-8")

        def include(match: re.Match) -> str:
            target = match.group(1)
            if target == "original":
                return _render_file(name, dirs[i + 1 :], variables)
            return _render_file(target.strip("\"'"), dirs, variables)

        text = re.sub(r"\{\{\s*include\s+(\"[^\"]+\"|original)\s*\}\}", include, text)
        text = re.sub(
            r"\{\{if (\w+)\}\}(.*?)\{\{endif\}\}",
            lambda mm: mm.group(2) if variables.get(mm.group(1)) else "",
            text,
            flags=re.S,
        )
        return re.sub(
            r"\{\{(\w+)\}\}", lambda mm: str(variables.get(mm.group(1), mm.group(0))), text
        )

    def render(name: str, dirs: list[Path], **variables: Any) -> str:
        return _render_file(name, dirs, variables).strip()

    m.PromptNotFound, m.prompt_dirs, m.render = PromptNotFound, prompt_dirs, render
    return m


def _extensions() -> types.ModuleType:
    m = types.ModuleType("python.helpers.extensions")

    class Extension:
        def __init__(self, agent: Any = None, **kwargs: Any) -> None:
            self.agent = agent

        def execute(self, **kwargs: Any) -> Any:
            return None

    def _classes(point: str, agent: Any) -> list[type]:
        folders = []
        if agent is not None:
            p = agent.config.profile
            folders += [files.usr_dir() / "agents" / p / "extensions" / point]
            folders += [files.BASE_DIR / "agents" / p / "extensions" / point]
        folders.append(files.BASE_DIR / "python" / "extensions" / point)
        chosen: dict[str, Path] = {}
        for folder in folders:
            if folder.is_dir():
                for f in folder.glob("*.py"):
                    chosen.setdefault(f.name, f)
        out = []
        for name in sorted(chosen):
            spec = importlib.util.spec_from_file_location(f"_ext_{point}_{name[:-3]}", chosen[name])
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            out += [
                v
                for v in vars(mod).values()
                if isinstance(v, type) and issubclass(v, Extension) and v is not Extension
            ]
        return out

    async def call_extensions(point: str, agent: Any = None, **kwargs: Any) -> None:
        for cls in _classes(point, agent):
            result = cls(agent).execute(**kwargs)
            if asyncio.iscoroutine(result):
                await result

    def call_extensions_sync(point: str, agent: Any = None, **kwargs: Any) -> None:
        for cls in _classes(point, agent):
            cls(agent).execute(**kwargs)

    m.Extension, m.call_extensions, m.call_extensions_sync = (
        Extension,
        call_extensions,
        call_extensions_sync,
    )
    return m


def _log() -> types.ModuleType:
    m = types.ModuleType("python.helpers.log")

    class LogItem:
        def __init__(self, log: Any, no: int, **fields: Any) -> None:
            self.log, self.no, self.fields = log, no, fields

        def update(self, **fields: Any) -> None:
            self.fields.update({k: v for k, v in fields.items() if v is not None})
            self.log.version += 1

        def stream(self, content: str = "", **kw: Any) -> None:
            self.fields["content"] = self.fields.get("content", "") + content
            self.log.version += 1

    class Log:
        def __init__(self) -> None:
            self.guid, self.version, self.logs = str(uuid.uuid4()), 0, []

        def log(self, type: str, heading: str = "", content: str = "", kvps=None, agentno=0):
            item = LogItem(
                self,
                len(self.logs),
                type=type,
                heading=heading,
                content=content,
                kvps=kvps,
                agentno=agentno,
            )
            self.logs.append(item)
            self.version += 1
            return item

        def output(self, start: int = 0) -> list[dict]:
            return [{"no": i.no, **i.fields} for i in self.logs[start:]]

    m.Log, m.LogItem = Log, LogItem
    return m


def _models() -> types.ModuleType:
    m = types.ModuleType("python.helpers.models")

    @dataclass
    class ModelConfig:
        provider: str
        name: str
        api_base: str = ""
        ctx_length: int = 128000
        kwargs: dict = field(default_factory=dict)

        @classmethod
        def from_settings(cls, settings: dict, prefix: str) -> ModelConfig:
            return cls(
                provider=settings.get(f"{prefix}_provider", ""),
                name=settings.get(f"{prefix}_name", ""),
                api_base=settings.get(f"{prefix}_api_base", ""),
            )

    @dataclass
    class ModelResult:
        response: str
        reasoning: str = ""

    class ModelError(Exception):
        code = "model_error"

        def __init__(self, message: str, status: int | None = None) -> None:
            super().__init__(message)
            self.status = status

    class ChatModel:
        def __init__(self, config: ModelConfig, api_key: str | None) -> None:
            self.config, self.api_key = config, api_key

        async def call(self, messages, *, on_reasoning=None, on_response=None) -> ModelResult:
            import openai

            client = openai.AsyncOpenAI(
                base_url=self.config.api_base, api_key=self.api_key or "none", max_retries=1
            )
            try:
                stream = await client.chat.completions.create(
                    model=self.config.name, messages=messages, stream=True
                )
                full, reasoning = "", ""
                async for chunk in stream:
                    if not chunk.choices:
                        continue
                    delta = chunk.choices[0].delta
                    r = getattr(delta, "reasoning_content", None) or ""
                    if r:
                        reasoning += r
                        if on_reasoning:
                            await on_reasoning(r, reasoning)
                    if delta.content:
                        full += delta.content
                        if on_response:
                            await on_response(delta.content, full)
                return ModelResult(full, reasoning)
            except openai.APIStatusError as e:
                raise ModelError(f"model call failed: HTTP {e.status_code}", e.status_code) from e
            finally:
                await client.close()

    m.ModelConfig, m.ModelResult, m.ModelError, m.ChatModel = (
        ModelConfig,
        ModelResult,
        ModelError,
        ChatModel,
    )
    return m


SHIMS = {
    "settings": _settings,
    "prompts": _prompts,
    "extensions": _extensions,
    "log": _log,
    "models": _models,
}


def install() -> list[str]:
    """Register stand-ins for missing helper modules; return their names."""
    installed = []
    for name, make in SHIMS.items():
        full = f"python.helpers.{name}"
        if full in sys.modules or (files.BASE_DIR / "python" / "helpers" / f"{name}.py").exists():
            continue
        module = make()
        sys.modules[full] = module
        setattr(sys.modules["python.helpers"], name, module)
        installed.append(name)
    return installed
