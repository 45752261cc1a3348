"""Fixtures for the journaled loop: a real SQLite journal, the scripted model server,
journaled chats, a test-only side-effect tool, and an in-process "restart"."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent import AgentConfig, AgentContext, UserMessage
from durability import Journal, failpoints
from python.durable import DurableChats, Submission
from python.durable.rebuild import restore_contexts
from python.durable.resume import recover
from python.helpers import files
from python.helpers import settings as settings_mod
from tests.support.model_server import ScriptedModel
from tests.support.model_server import model_server as model_server

TIMEOUT = 30
HERE = Path(__file__).resolve().parent


def make_settings(model_url: str, workdir: Path, **extra: Any) -> dict:
    values = dict(settings_mod.DEFAULTS)
    for prefix in ("chat_model", "util_model"):
        model = {"provider": "other", "name": "scripted-model", "api_base": model_url}
        limits = {"kwargs": {}, "rl_requests": 0, "rl_input": 0, "rl_output": 0}
        values.update({f"{prefix}_{key}": value for key, value in {**model, **limits}.items()})
    values["chat_model_ctx_length"] = 100_000
    values["chat_model_ctx_history"] = 0.7
    values["agent_profile"] = "agent0"
    values["chat_rename"] = False  # tests/support/ui_server.py: exactly the scripted calls
    values["workdir"] = str(workdir)
    for timeout in ("first_output", "between_output"):
        values[f"code_exec_{timeout}_timeout"] = 10
    values["code_exec_max_timeout"] = 20
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
    """One journal file; chats on it (one process's DurableChats); crash (in-process) and
    restart (a new DurableChats on the reopened journal, as a new process)."""

    def __init__(self, model: ScriptedModel, usr: Path, workdir: Path) -> None:
        self.model = model
        self.usr = usr
        self.workdir = workdir
        self.db = usr / "durability" / "journal.sqlite"
        self.settings_extra: dict[str, Any] = {}
        self._receipts: Any = None  # durability.adapters.ShellReceipts, when a test wants them
        self.chats = self._open()

    def _open(self) -> DurableChats:
        journal = Journal.open_sqlite(self.db)
        return DurableChats(journal, config=self.config, receipts=self._receipts)

    @property
    def journal(self) -> Journal:
        return self.chats.journal

    @property
    def receipts(self) -> Any:
        return self._receipts

    @receipts.setter
    def receipts(self, value: Any) -> None:
        self._receipts = self.chats.receipts = value

    def config(self) -> AgentConfig:
        return AgentConfig.from_settings(
            make_settings(self.model.url, self.workdir, **self.settings_extra)
        )

    def chat(self) -> AgentContext:
        return self.chats.create()

    async def submit(self, ctx: AgentContext, msg: UserMessage) -> Submission:
        """A message into a chat through the one way in (``DurableChats.submit``)."""
        _chat, submission = await self.chats.submit(ctx.id, msg)
        return submission

    async def send(
        self, ctx: AgentContext, text: str, input_id: str | None = None, timeout: float = TIMEOUT
    ) -> str:
        return await asyncio.wait_for(ctx.communicate(UserMessage(text, id=input_id)), timeout)

    async def crash(
        self, ctx: AgentContext, text: str, monkeypatch, boundary: str, match: str
    ) -> None:
        """Run ``text`` until the failpoint fires (SimulatedCrash stands in for SIGKILL)."""
        monkeypatch.setenv(failpoints.CRASH_AT_ENV, boundary)
        monkeypatch.setenv(failpoints.CRASH_MATCH_ENV, match)
        with failpoints.raise_instead(), pytest.raises(failpoints.SimulatedCrash):
            await self.send(ctx, text)
        monkeypatch.delenv(failpoints.CRASH_AT_ENV)
        monkeypatch.delenv(failpoints.CRASH_MATCH_ENV)

    async def restart(self, adapters: dict | None = None) -> list:
        """The process stops (its chats vanish, their runs stay as they are), a new one
        reopens the journal, rebuilds the chats and recovers."""
        await self.chats.close()
        self.chats = self._open()
        restore_contexts(self.chats)
        if adapters is None and self.receipts is not None:
            adapters = {"adapter:shell": self.receipts.classify}
        return await recover(self.chats, adapters=adapters)

    def get(self, context_id: str) -> AgentContext:
        ctx = self.chats.get(context_id)
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
        await self.chats.close()


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
