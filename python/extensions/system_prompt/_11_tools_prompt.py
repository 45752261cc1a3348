"""system_prompt: the tools section, built from every agent.system.tool.<name>.md.

Upstream's file names for the same tools (``agent.system.tool.call_sub.md``,
``agent.system.tool.code_exe.md``) count as the tool's prompt too: a profile that overrides
a tool prompt under either name replaces ours (python/helpers/prompts.py)."""

from __future__ import annotations

from typing import Any

from python.helpers import prompts
from python.helpers.extensions import Extension


class ToolsPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if system_prompt is not None:
            system_prompt.append(prompts.tools_prompt(self.agent))
