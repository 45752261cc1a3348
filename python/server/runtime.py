"""App-wide state of one server process: settings, login config, and the durable chats.

Every endpoint handler gets the process's ``Runtime``. The chats and their journal are
``runtime.chats`` (python/durable/chats.py), opened by ``start`` (which also starts the
scheduler's loop, ``runtime.chats.scheduler``) and closed by ``shutdown``;
``admit_message`` is the one way a message from a client enters a chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agent import AgentConfig, AgentContext, AgentContextType, UserMessage
from python.durable import startup
from python.durable.admission import PLAIN, Submission, SubmitOptions
from python.durable.chats import DurableChats
from python.durable.new_chats import ChatSpec
from python.helpers import notifications
from python.helpers.errors import ChatNotFound, ShuttingDown
from python.server.auth import AuthConfig

if TYPE_CHECKING:  # pragma: no cover
    from durability import Journal
    from durability.config import SharedConfig
    from python.durable.memory_service import MemoryService
    from python.durable.shared import SharedWorker

logger = logging.getLogger("a0.runtime")
T = TypeVar("T")

API_CHAT_SWEEP_SECONDS = 60.0


class Runtime:
    """Holds what every endpoint shares. One instance per server process."""

    def __init__(
        self,
        usr: Path,
        settings: dict[str, Any],
        auth: AuthConfig,
        *,
        overrides: Mapping[str, str] | None = None,
        shared: SharedConfig | None = None,
    ) -> None:
        self.usr = usr
        self.settings = settings
        self.auth = auth
        self.overrides = dict(overrides or {})  # extra --key=value arguments
        self.runtime_id = secrets.token_hex(8)
        self.started_at = time.time()
        self._chats: DurableChats | None = None
        self._api_expiry: dict[str, float] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._stopping = False
        #: Shared mode (A0_DURABILITY_POSTGRES_DSN, docs/shared-workers.md); None: SQLite.
        self.shared_config = shared
        self.shared: SharedWorker | None = None
        #: The toasts and their history, in memory (python/helpers/notifications.py).
        self.notifications = notifications.fresh_manager()
        #: Memory and knowledge (python/durable/memory_service.py); opened by ``start``.
        self._memory: MemoryService | None = None

    # the durable chats -------------------------------------------------------------------
    @property
    def chats(self) -> DurableChats:
        """The process's chats over its journal (opened by ``start``)."""
        return _started(self._chats, "journal")

    @property
    def journal(self) -> Journal:
        return self.chats.journal

    @property
    def memory(self) -> MemoryService:
        """The process's memory service (opened by ``start``)."""
        return _started(self._memory, "memory")

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
            ctx.config.settings.clear()
            ctx.config.settings.update(self.settings)
            for agent in ctx.agents():
                if agent.config is not ctx.config:
                    agent.config.settings.update(self.settings)
                agent.forget_models()  # cached model clients were built from the old settings
        if self._memory is not None:
            self._memory.settings_changed()  # a new embedding model re-embeds in the background

    def agent_config(self) -> AgentConfig:
        """A fresh AgentConfig for a new chat, from the current settings."""
        return AgentConfig.from_settings(self.settings)

    # chats ----------------------------------------------------------------------------
    def find_context(self, ctx_id: str) -> AgentContext | None:
        return self.chats.get(ctx_id) if ctx_id else None

    async def open_chats(self, specs: Sequence[ChatSpec]) -> list[AgentContext]:
        """Make the chats chat_create / chat_load ask for: journaled first (all of them in one
        transaction), so they survive a restart; 409 ``context_exists`` for an id in use
        that must be kept (``ChatSpec.keep_id``)."""
        if self._stopping:
            raise ShuttingDown("The server is shutting down.")
        return await self.chats.open(specs)

    def user_contexts(self) -> list[AgentContext]:
        background = AgentContextType.BACKGROUND
        return [c for c in self.chats.contexts() if c.type != background]

    def remove_context(self, ctx_id: str) -> None:
        if self.find_context(ctx_id) is None:
            raise ChatNotFound(f"Chat '{ctx_id}' not found.")
        AgentContext.remove(ctx_id)
        self._api_expiry.pop(ctx_id, None)

    async def shared_chat(self, ctx_id: str) -> AgentContext | None:
        """The chat a poll shows: with shared workers, a chat another worker created is
        loaded and an idle chat is brought up to the journal (at most once a second);
        with SQLite the loaded chat (one start-up left for later is rebuilt now)."""
        return await self.chats.ownership.chat_for_poll(ctx_id)

    async def forget_purged_chats(self) -> list[str]:
        """Drop the loaded chats whose every run retention removed; returns their ids."""
        gone = await self.chats.forget_purged()
        for ctx_id in gone:
            self._api_expiry.pop(ctx_id, None)
        return gone

    async def admit_message(
        self, ctx_id: str, message: UserMessage, options: SubmitOptions = PLAIN
    ) -> tuple[AgentContext | None, Submission]:
        """Take a message for the chat ``ctx_id`` (a new chat when empty) and start its
        run: the one admission path of every message endpoint (``DurableChats.submit``)."""
        if self._stopping:
            raise ShuttingDown("The server is shutting down.")
        self.refresh_masker()
        return await self.chats.submit(ctx_id, message, options)

    def cancel_chat(self, ctx_id: str) -> int:
        """Stop the chat's running task (the Stop button); returns how many were stopped."""
        ctx = self.find_context(ctx_id)
        return 1 if ctx is not None and ctx.session.stop() else 0

    def set_api_lifetime(self, ctx_id: str, hours: float) -> None:
        self._api_expiry[ctx_id] = time.time() + hours * 3600

    # lifecycle -------------------------------------------------------------------------
    async def apply_mcp(self) -> None:
        """Connect the MCP servers of the settings (in the background) and mask their
        credentials from now on, in the journal too."""
        from python.helpers import mcp_client

        await mcp_client.manager().apply(self.settings)
        self.refresh_masker()

    def refresh_masker(self) -> None:
        """The journal masks with the secrets known now: a secret written into usr/.env or
        usr/secrets.env by hand counts from the next message on (no restart needed)."""
        from python.helpers import secrets

        if self._chats is None:
            return
        masker = secrets.masker_for(self.usr)
        journal = self._chats.journal
        if journal.masker is not masker and not journal.masker.same_secrets(masker):
            journal.set_masker(masker)

    async def start(self) -> None:
        from python.helpers import secrets

        await self.apply_mcp()  # before the journal opens: its masker knows MCP credentials
        masker = secrets.masker_for(self.usr)
        if self.shared_config is None:
            config = self.agent_config
            chats, _plans = await startup.open_chats(self.usr, self.settings, masker, config)
            self._chats = chats
        else:
            self._chats = await self._start_shared(masker, self.shared_config)
        # After recovery: recovered runs come first. On shared workers every worker fires;
        # a slot's input id (sched:<task>:<slot>) lets the journal take it once.
        self._chats.scheduler.start()
        from python.durable.memory_service import MemoryService

        self._memory = MemoryService(self._chats.journal, self.usr, lambda: self.settings)
        self._sweeper = asyncio.create_task(self._sweep_api_chats(), name="api-chat-sweeper")

    def serving(self) -> None:
        """The server answers requests: memory's background work starts (an idle chat is
        rebuilt only when a request names it: python/durable/chats.py)."""
        if self._memory is not None and not self._stopping:
            self._memory.start()  # knowledge import and re-embedding, in the background

    async def _start_shared(self, masker: Any, shared: SharedConfig) -> DurableChats:
        """Open the shared journal as this worker's and start claiming and sweeping."""
        from python.durable.shared import SharedWorker

        chats = await startup.open_shared_chats(self.usr, shared, masker, self.agent_config)
        resources = None
        try:
            from durability.crypto import ResourceCipher
            from durability.resources import SharedResources

            cipher = ResourceCipher(shared.resource_key.reveal())
            resources = SharedResources(chats.journal, cipher, max_bytes=shared.resource_max_bytes)
            self.shared = SharedWorker(chats, shared, resources)
            self.shared.start()
        except BaseException:
            chats.journal.close()
            raise
        return chats

    async def _sweep_api_chats(self) -> None:
        while True:
            await asyncio.sleep(API_CHAT_SWEEP_SECONDS)
            self.sweep_expired_api_chats()

    def sweep_expired_api_chats(self, now: float | None = None) -> list[str]:
        """Remove idle external-API chats whose lifetime_hours ran out; returns their ids."""
        now = time.time() if now is None else now
        removed = []
        for ctx_id, expiry in list(self._api_expiry.items()):
            ctx = self.find_context(ctx_id)
            if expiry <= now and not (ctx is not None and ctx.is_running()):
                with contextlib.suppress(ChatNotFound):
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
        if self._chats is not None:
            self._chats.begin_shutdown()

    async def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the chats, flush and close the journal, close the MCP servers."""
        self.begin_shutdown()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._memory is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._memory.close(), timeout=timeout)
        if self._chats is not None:  # the chats' tasks end, then a shared worker's claims
            try:  # are given up
                await self._chats.ownership.release(timeout)
            except Exception as exc:
                logger.warning("shared worker not closed cleanly: %s", type(exc).__name__)
        if self._chats is not None:
            try:
                await self._chats.close(timeout=timeout)
            except Exception as exc:  # the MCP servers still get closed
                logger.warning("chats not closed cleanly: %s", type(exc).__name__)
        from python.helpers import mcp_client

        with contextlib.suppress(Exception):  # stdio servers also end when stdin closes
            await asyncio.wait_for(mcp_client.manager().close(), timeout=timeout)


def _started(part: T | None, name: str) -> T:
    """``part``, opened by ``Runtime.start``; before that a RuntimeError names it."""
    if part is None:
        raise RuntimeError(f"the runtime has not started: no {name} is open")
    return part
