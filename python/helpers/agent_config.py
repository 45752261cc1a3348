"""``AgentConfig``: one agent's configuration (profile, settings, work directory).

Upstream keeps it in agent.py; it lives here so that agent.py stays the loop. agent.py
re-exports it, so ``from agent import AgentConfig`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from python.helpers import files
from python.helpers.models import ModelConfig


@dataclass
class AgentConfig:
    """Per-agent configuration: profile, model settings and extra values."""

    profile: str = "agent0"
    settings: dict[str, Any] = field(default_factory=dict)
    workdir: str = ""
    additional: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: dict[str, Any], profile: str | None = None) -> AgentConfig:
        return cls(
            profile=profile or str(settings.get("agent_profile") or "agent0"),
            settings=dict(settings),
            workdir=str(settings.get("workdir") or ""),
        )

    @property
    def prompts_dirs(self) -> list[Path]:
        from python.helpers import prompts

        return prompts.prompt_dirs(self.profile)

    def model_config(self, kind: str) -> ModelConfig:
        """The model of a role: ``chat``, ``utility`` or ``browser`` (the browser agent's;
        with no ``browser_model_name`` set it is the chat model)."""
        prefix = "util_model" if kind == "utility" else "chat_model"
        if kind == "browser" and str(self.settings.get("browser_model_name") or "").strip():
            prefix = "browser_model"
        return ModelConfig.from_settings(self.settings, prefix)

    @property
    def chat_model(self) -> ModelConfig:
        return self.model_config("chat")

    @property
    def utility_model(self) -> ModelConfig:
        return self.model_config("utility")

    def history_token_limit(self) -> int:
        ctx = int(self.settings.get("chat_model_ctx_length") or 0)
        share = float(self.settings.get("chat_model_ctx_history") or 0.7)
        return int(ctx * share)

    def utility_input_limit(self) -> int:
        """Tokens one utility-model input may hold: ``util_model_ctx_length`` times
        ``util_model_ctx_input`` (upstream's names; 0: no limit)."""
        ctx = int(self.settings.get("util_model_ctx_length") or 0)
        share = float(self.settings.get("util_model_ctx_input") or 0.7)
        return int(ctx * share)

    def workdir_path(self) -> Path:
        return Path(self.workdir) if self.workdir else files.usr_dir() / "workdir"

    def tool_dirs(self) -> list[Path]:
        p = self.profile
        return [
            files.usr_dir() / "agents" / p / "tools",
            files.BASE_DIR / "agents" / p / "tools",
            files.BASE_DIR / "python" / "tools",
        ]
