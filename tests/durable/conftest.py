"""Fixtures for the journaled loop: a real SQLite journal, the scripted model server,
journaled chats, a test-only side-effect tool, and an in-process "restart"."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent import AgentConfig, AgentContext, UserMessage
from durability import Journal, failpoints
from python.durable import admission as durable_admission
from python.durable.resume import recover, restore_contexts
from python.helpers import files
from python.helpers import settings as settings_mod
from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server

TIMEOUT = 30
HERE = Path(__file__).resolve().parent


def make_settings(model_url: str, workdir: Path, **extra: Any) -> dict:
    values = dict(settings_mod.DEFAULTS)
    for prefix in ("chat_model", "util_model"):
        values.update({
            f"{prefix}_provider": "other", f"{prefix}_name": "scripted-model",
            f"{prefix}_api_base": model_url, f"{prefix}_kwargs": {},
            f"{prefix}_rl_requests": 0, f"{prefix}_rl_input": 0, f"{prefix}_rl_output": 0,
        })  # fmt: skip
    values.update({
        "chat_model_ctx_length": 100_000, "chat_model_ctx_history": 0.7,
        "agent_profile": "agent0", "workdir": str(workdir),
        "code_exec_first_output_timeout": 10, "code_exec_between_output_timeout": 10,
        "code_exec_max_timeout": 20,
    })  # fmt: skip
    values.update(extra)
    return values


def install_side_effect_tool(usr: Path) -> None:
    tools = usr / "agents" / "agent0" / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "side_effect_tool.py", tools / "side_effect.py")


def side_effects(usr: Path | None = None) -> list[str]:
    path = (usr or files.usr_dir()) / "side_effects.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


class Harness:
    """One journal file; chats on it; crash (in-process) and restart."""

    def __init__(self, model: ScriptedModel, usr: Path, workdir: Path) -> None:
        self.model = model
        self.usr = usr
        self.workdir = workdir
        self.db = usr / "durability" / "journal.sqlite"
        self.journal = Journal.open_sqlite(self.db)
        self.settings_extra: dict[str, Any] = {}
        self.contexts: list[AgentContext] = []
        self.receipts: Any = None  # durability.adapters.ShellReceipts, when a test wants them

    def config(self) -> AgentConfig:
        return AgentConfig.from_settings(
            make_settings(self.model.url, self.workdir, **self.settings_extra)
        )

    def chat(self) -> AgentContext:
        ctx = AgentContext(self.config(), journal=self.journal)
        if self.receipts is not None:
            ctx.receipts = self.receipts
        self.contexts.append(ctx)
        return ctx

    async def send(
        self, ctx: AgentContext, text: str, input_id: str | None = None, timeout: float = TIMEOUT
    ) -> str:
        return await asyncio.wait_for(ctx.communicate(UserMessage(text, id=input_id)), timeout)

    async def crash(self, ctx: AgentContext, text: str, monkeypatch, boundary: str,
                    match: str) -> None:  # fmt: skip
        """Run ``text`` until the failpoint fires (SimulatedCrash stands in for SIGKILL)."""
        monkeypatch.setenv(failpoints.CRASH_AT_ENV, boundary)
        monkeypatch.setenv(failpoints.CRASH_MATCH_ENV, match)
        with failpoints.raise_instead(), pytest.raises(failpoints.SimulatedCrash):
            await self.send(ctx, text)
        monkeypatch.delenv(failpoints.CRASH_AT_ENV)
        monkeypatch.delenv(failpoints.CRASH_MATCH_ENV)

    async def restart(self, adapters: dict | None = None) -> list:
        """Forget every chat, reopen the journal, rebuild chats and recover."""
        for ctx in self.contexts:  # the process died: chats vanish, nothing is journaled
            AgentContext._contexts.pop(ctx.id, None)
            if ctx.task is not None and not ctx.task.done():
                ctx.task.cancel()
            await ctx.shells.close_all()
        self.journal.close()
        self.journal = Journal.open_sqlite(self.db)
        self.contexts = restore_contexts(self.journal, self.config, receipts=self.receipts)
        if adapters is None and self.receipts is not None:
            adapters = {"adapter:shell": self.receipts.classify}
        return await recover(self.journal, adapters=adapters)

    def get(self, context_id: str) -> AgentContext:
        ctx = AgentContext.get(context_id)
        assert ctx is not None
        return ctx

    async def settle(self, context_id: str) -> Any:
        """Wait for the chat's (resumed) task, if any; return its result."""
        ctx = self.get(context_id)
        if ctx.task is None:
            return None
        return await asyncio.wait_for(ctx.task, TIMEOUT)

    def run_of(self, context_id: str):
        runs = self.journal.list_runs(context_id=context_id)
        assert runs, "the chat has a run"
        return runs[0]

    async def close(self) -> None:
        for ctx in self.contexts:
            shells = ctx.shells
            AgentContext.remove(ctx.id)
            await shells.close_all()
            if ctx.task is not None and not ctx.task.done():
                with contextlib.suppress(BaseException):
                    await ctx.task
        await durable_admission.flush_background()
        self.journal.close()


@pytest.fixture
async def harness(model_server, tmp_path) -> Any:
    usr = files.usr_dir()
    install_side_effect_tool(usr)
    h = Harness(model_server, usr, tmp_path / "work")
    yield h
    await h.close()


def prompt_text(request: dict) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


Until = Callable[[], bool]


def install_unstorable_tool(usr: Path) -> None:
    tools = usr / "agents" / "agent0" / "tools"
    tools.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "unstorable_tool.py", tools / "unstorable.py")
