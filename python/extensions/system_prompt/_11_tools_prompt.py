"""system_prompt: the tools section, built from every agent.system.tool.<name>.md."""

from __future__ import annotations

from typing import Any

from python.helpers.extensions import Extension

PREFIX = "agent.system.tool."


def tool_prompt_names(dirs: list) -> list[str]:
    """File names of tool prompts along the prompt folders (first of a name wins)."""
    names: set[str] = set()
    for folder in dirs:
        if folder.is_dir():
            names.update(p.name for p in folder.glob(PREFIX + "*.md"))
    return sorted(names)


class ToolsPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if system_prompt is None:
            return
        agent = self.agent
        parts = [agent.read_prompt(name) for name in tool_prompt_names(agent.config.prompts_dirs)]
        system_prompt.append(agent.read_prompt("agent.system.tools.md", tools="\n\n".join(parts)))
