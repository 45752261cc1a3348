"""App-wide state of one server process: settings, login config, chats and their tasks."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from python.durable import seams as durable
from python.durable import startup as runtime_journal
from python.helpers.api import ApiError
from python.helpers.auth import AuthConfig

logger = logging.getLogger("a0.runtime")

API_CHAT_SWEEP_SECONDS = 60.0


def _agent_module():
    import agent  # imported lazily: the HTTP layer must load without the loop

    return agent


class Runtime:
    """Holds what every endpoint shares. One instance per server process."""

    def __init__(
        self,
        usr: Path,
        settings: dict[str, Any],
        auth: AuthConfig,
        *,
        overrides: Mapping[str, str] | None = None,
        durable: bool = False,
    ) -> None:
        self.usr = usr
        self.settings = settings
        self.auth = auth
        self.overrides = dict(overrides or {})  # extra --key=value arguments
        self.runtime_id = secrets.token_hex(8)
        self.started_at = time.time()
        self.durable = durable  # open the journal at start (run_ui.py; off in unit tests)
        self.journal: Any = None  # durability.Journal once started with durable=True
        self.receipts: Any = None  # durability.adapters.shell.ShellReceipts
        self._tasks: dict[str, set[asyncio.Task]] = {}
        self._api_expiry: dict[str, float] = {}
        self._sweeper: asyncio.Task | None = None
        self._stopping = False
        self.input_locks = runtime_journal.KeyedLocks()  # admission, one input id at a time
        self.journaled_chats: set[str] = set()  # chats with runs in the journal
        self.admitting: collections.Counter[str] = collections.Counter()  # chat id -> messages

    # settings -----------------------------------------------------------------------
    @property
    def api_token(self) -> str:
        return str(self.settings.get("mcp_server_token") or "")

    async def reload_settings(self) -> dict[str, Any]:
        from python.helpers import settings as settings_mod

        self.settings = await asyncio.to_thread(settings_mod.load, self.usr)
        return self.settings

    def apply_settings_to_chats(self) -> None:
        """New settings (models, keys) reach existing chats at their next model call."""
        for ctx in self.user_contexts():
            config: Any = getattr(ctx, "config", None)
            if isinstance(getattr(config, "settings", None), dict):
                config.settings.clear()
                config.settings.update(self.settings)
            agent = getattr(ctx, "agent0", None)
            while agent is not None:
                agent_settings = getattr(getattr(agent, "config", None), "settings", None)
                if isinstance(agent_settings, dict) and agent_settings is not getattr(
                    config, "settings", None
                ):
                    agent_settings.update(self.settings)
                models = getattr(agent, "_models", None)
                if isinstance(models, dict):
                    models.clear()  # cached model clients were built from the old settings
                agent = agent.data.get("_subordinate") if isinstance(agent.data, dict) else None

    def agent_config(self) -> Any:
        """A fresh AgentConfig for a new chat, from the current settings."""
        agent = _agent_module()
        cls = agent.AgentConfig
        factory = getattr(cls, "from_settings", None)
        if factory is not None:
            return factory(self.settings)
        return cls()

    # chats ----------------------------------------------------------------------------
    def get_context(self, ctx_id: str) -> Any:
        ctx = _agent_module().AgentContext.get(ctx_id) if ctx_id else None
        if ctx is None:
            raise ApiError("context_not_found", f"Chat '{ctx_id}' not found.", 404)
        return ctx

    def find_context(self, ctx_id: str) -> Any | None:
        return _agent_module().AgentContext.get(ctx_id) if ctx_id else None

    def create_context(self, ctx_id: str | None = None, name: str | None = None) -> Any:
        agent = _agent_module()
        if ctx_id and agent.AgentContext.get(ctx_id) is not None:
            raise ApiError("context_exists", f"Chat '{ctx_id}' already exists.", 409)
        if self.journal is None:
            return agent.AgentContext(self.agent_config(), id=ctx_id or None, name=name)
        ctx = agent.AgentContext(
            self.agent_config(), id=ctx_id or None, name=name, journal=self.journal
        )
        return runtime_journal.attach(self, ctx)

    def user_contexts(self) -> list[Any]:
        agent = _agent_module()
        background = agent.AgentContextType.BACKGROUND
        return [c for c in agent.AgentContext.all() if getattr(c, "type", None) != background]

    def remove_context(self, ctx_id: str) -> None:
        ctx = self.get_context(ctx_id)
        self.cancel_chat(ctx_id)
        with contextlib.suppress(Exception):
            ctx.kill_process()
        _agent_module().AgentContext.remove(ctx_id)
        self._api_expiry.pop(ctx_id, None)

    def make_message(
        self, text: str, attachments: list[str] | None = None, message_id: str | None = None
    ) -> Any:
        return _agent_module().UserMessage(text, attachments or [], id=message_id)

    def start_message(self, ctx: Any, message: Any) -> asyncio.Task:
        """Hand a message to the chat; returns the task that produces the answer."""
        if self._stopping:
            raise ApiError("shutting_down", "The server is shutting down.", 503)
        task = ctx.communicate(message)
        self.track_task(ctx.id, task)
        return task

    def track_task(self, ctx_id: str, task: asyncio.Task) -> None:
        """Remember a chat task so Stop, reset and shutdown can cancel it."""
        tasks = self._tasks.setdefault(ctx_id, set())
        if task not in tasks:
            tasks.add(task)
            task.add_done_callback(functools.partial(self._task_done, ctx_id))

    def _task_done(self, ctx_id: str, task: asyncio.Task) -> None:
        self._tasks.get(ctx_id, set()).discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            logger.info("chat %s task ended with %s", ctx_id, type(exc).__name__)

    async def chat(self, ctx_id: str) -> Any:
        """The chat named by a request (404 ``context_not_found`` when there is none, also
        when retention removed every run of it: a purged chat is gone, as after a restart)."""
        if ctx_id in self.journaled_chats:
            await self.forget_purged_chats(ctx_id)
        return self.get_context(ctx_id)

    async def forget_purged_chats(self, only: str | None = None) -> list[str]:
        """Drop the loaded chats (or ``only`` that one) whose every run retention removed
        (`python -m durability retention` while the server runs); returns their ids."""
        if self.journal is None:
            return []
        wanted = [only] if only is not None else list(self.journaled_chats)
        idle = [c for c in wanted if c in self.journaled_chats and self._idle(c)]
        if not idle:
            return []
        alive = await self.journal.aio.contexts_with_runs(idle)
        gone = []
        for ctx_id in idle:
            if ctx_id in alive or not self._idle(ctx_id):  # checked again after the await
                continue
            self.journaled_chats.discard(ctx_id)
            ctx = self.find_context(ctx_id)
            if ctx is not None:
                ctx.journal = None  # the journal forgot the chat already: journal nothing
                self.remove_context(ctx_id)
            gone.append(ctx_id)
        if gone:
            logger.info("retention removed every run of %d chat(s): dropped", len(gone))
        return gone

    def _idle(self, ctx_id: str) -> bool:
        ctx = self.find_context(ctx_id)
        busy = ctx is not None and (ctx.is_running() or getattr(ctx, "durable_run", None))
        return not busy and not self.admitting[ctx_id] and not self.is_running(ctx_id)

    async def admit_message(
        self, ctx_id: str, message: Any, *, follow_input: bool = False
    ) -> tuple[Any | None, runtime_journal.Admitted]:
        """Take a message for the chat ``ctx_id`` (a new chat when empty) and start its run;
        the one admission path of every message endpoint (runtime_journal.admit)."""
        if self._stopping:
            raise ApiError("shutting_down", "The server is shutting down.", 503)
        if self.journal is not None:
            return await runtime_journal.admit(self, ctx_id, message, follow_input=follow_input)
        ctx = self.get_context(ctx_id) if ctx_id else self.create_context()
        task = self.start_message(ctx, message)
        admitted = runtime_journal.Admitted(
            "started", None, message.id or "", "active", task, None, ctx.id
        )
        return ctx, admitted

    async def wait_answer(self, task: asyncio.Task | None) -> str | None:
        """Wait for a chat task; a cancelled request never cancels the chat."""
        if task is None:
            return None
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise ApiError(
                    "chat_stopped", "The chat was stopped before it answered.", 409
                ) from None
            raise
        return "" if result is None else str(result)

    async def finish_outcome(
        self, admitted: runtime_journal.Admitted, answer: str | None
    ) -> tuple[str, str | None]:
        """(run status, response) once the run's task ended; a held run has no response."""
        return await runtime_journal.outcome(self, admitted, answer)

    def is_running(self, ctx_id: str) -> bool:
        if any(not t.done() for t in self._tasks.get(ctx_id, ())):
            return True
        ctx = self.find_context(ctx_id)
        check = getattr(ctx, "is_running", None)
        return bool(check()) if callable(check) else False

    def cancel_chat(self, ctx_id: str) -> int:
        """Cancel the chat's running tasks (the Stop button); returns how many."""
        tasks = [t for t in self._tasks.get(ctx_id, ()) if not t.done()]
        ctx = None
        with contextlib.suppress(ImportError):
            ctx = self.find_context(ctx_id)
        ctx_task = getattr(ctx, "task", None)
        if isinstance(ctx_task, asyncio.Task) and not ctx_task.done() and ctx_task not in tasks:
            tasks.append(ctx_task)
        for task in tasks:
            task.cancel()
        return len(tasks)

    def set_api_lifetime(self, ctx_id: str, hours: float) -> None:
        self._api_expiry[ctx_id] = time.time() + hours * 3600

    # lifecycle -------------------------------------------------------------------------
    async def apply_mcp(self) -> None:
        """Connect the MCP servers of the settings (in the background) and mask their
        credentials from now on, in the journal too."""
        from python.helpers import mcp_client, secrets

        await mcp_client.manager().apply(self.settings)
        masker = secrets.masker_for(self.usr)
        if self.journal is not None and self.journal.masker is not masker:
            self.journal.set_masker(masker)

    async def start(self) -> None:
        await self.apply_mcp()  # before the journal opens: its masker knows MCP credentials
        if self.durable:
            await runtime_journal.start(self)
        self._sweeper = asyncio.create_task(self._sweep_api_chats(), name="api-chat-sweeper")

    async def _sweep_api_chats(self) -> None:
        while True:
            await asyncio.sleep(API_CHAT_SWEEP_SECONDS)
            self.sweep_expired_api_chats()

    def sweep_expired_api_chats(self, now: float | None = None) -> list[str]:
        """Remove idle external-API chats whose lifetime_hours ran out; returns their ids."""
        now = time.time() if now is None else now
        removed = []
        for ctx_id, expiry in list(self._api_expiry.items()):
            if expiry <= now and not self.is_running(ctx_id):
                with contextlib.suppress(ApiError):
                    self.remove_context(ctx_id)
                self._api_expiry.pop(ctx_id, None)
                removed.append(ctx_id)
        return removed

    def begin_shutdown(self) -> None:
        """Called from the signal handler: cancel every running chat task right away.

        Journaled runs cancelled by a shutdown stay active, so the next start recovers them
        (a person's Stop ends a run; a server stop never does).
        """
        self._stopping = True
        durable.begin_shutdown()
        ids = set(self._tasks)
        with contextlib.suppress(Exception):  # the loop may not even be importable
            ids |= {c.id for c in _agent_module().AgentContext.all()}
        for ctx_id in ids:
            self.cancel_chat(ctx_id)

    async def shutdown(self, timeout: float = 5.0) -> None:
        try:
            self.begin_shutdown()
            if self._sweeper is not None:
                self._sweeper.cancel()
            pending = [t for ts in self._tasks.values() for t in ts if not t.done()]
            if self._sweeper is not None:
                pending.append(self._sweeper)
            if pending:
                await asyncio.wait(pending, timeout=timeout)
            with contextlib.suppress(Exception):
                contexts = _agent_module().AgentContext.all()
                for ctx in contexts:
                    with contextlib.suppress(Exception):
                        ctx.kill_process()
                closers = [c.shells.close_all() for c in contexts]
                if closers:
                    await asyncio.wait_for(
                        asyncio.gather(*closers, return_exceptions=True), timeout=timeout
                    )
            runtime_journal.close(self)
            from python.helpers import mcp_client

            with contextlib.suppress(Exception):  # stdio servers also end when stdin closes
                await asyncio.wait_for(mcp_client.manager().close(), timeout=timeout)
        finally:
            durable.end_shutdown()  # the window is over (tests run many servers)
