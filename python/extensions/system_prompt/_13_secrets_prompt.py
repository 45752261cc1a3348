"""system_prompt: which secrets exist (their names as ``§§secret(NAME)`` aliases, never their
values) and how to use them (agent.system.secrets.md), as upstream appends it."""

from __future__ import annotations

from typing import Any

from python.helpers import secrets
from python.helpers.extensions import Extension


class SecretsPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        if system_prompt is not None:
            listing = secrets.names_listing()
            system_prompt.append(self.agent.read_prompt("agent.system.secrets.md", secrets=listing))
