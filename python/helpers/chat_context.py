"""A chat's state, one layer below the loop: the registry of chats, pause, log, shells,
the poll row, and the controls its durable session owns.

agent.py's ``AgentContext`` is ``ChatContext`` plus the chat's agents (agent 0, its
subordinates and the chain of their monologues). The split keeps agent.py the loop
without an import cycle: this module never imports agent.py, and agent.py re-exports what
lives here, so ``from agent import AgentContextType, UserMessage, new_context_id`` keeps
working (upstream defines them in agent.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar, Self

from python.helpers import secrets as secret_store
from python.helpers.agent_config import AgentConfig
from python.helpers.chat_session import ChatSession
from python.helpers.log import Log
from python.helpers.shell import ShellSessions


class AgentContextType(Enum):
    USER = "user"
    TASK = "task"
    BACKGROUND = "background"


@dataclass
class UserMessage:
    message: str
    attachments: list[str] = field(default_factory=list)
    system_message: list[str] = field(default_factory=list)
    id: str | None = None
    #: image parts of the attachments (python/helpers/images.py), set at admission
    images: list[dict[str, Any]] = field(default_factory=list)


class ChatMasker:
    """Masks what enters a chat (messages, replies, tool results, log items): with every
    secret known now (python/helpers/secrets.py: the environment, usr/.env, usr/secrets.env)
    and then with the secrets of the chat's journal, so that what the chat holds, shows and
    answers is byte for byte what the journal keeps (docs/durability.md, "Secrets")."""

    def __init__(self, context: ChatContext) -> None:
        self._context = context

    def _journal_masker(self, fresh: Any) -> Any:
        session = getattr(self._context, "session", None)
        masker = getattr(getattr(session, "journal", None), "masker", None)
        return None if masker is None or masker is fresh else masker

    def mask(self, value: Any) -> Any:
        """A masked copy of ``value`` (str, dict, list, tuple; anything else as it is)."""
        fresh = secret_store.masker_for()
        value = fresh.mask(value)
        journal = self._journal_masker(fresh)
        return journal.mask(value) if journal is not None else value

    def hold_back(self, masked: str) -> str:
        """Masked text less a tail that may be the start of a secret (a stream's text so
        far: the rest comes later and shows whether it is one)."""
        fresh = secret_store.masker_for()
        masked = fresh.hold_back(masked)
        journal = self._journal_masker(fresh)
        return journal.hold_back(masked) if journal is not None else masked

    def mask_stream(self, text: str) -> str:
        """``text`` masked, less a tail that may be the start of a secret."""
        return self.hold_back(str(self.mask(text)))


def new_context_id() -> str:
    """A fresh chat id: 8 letters and digits (upstream's format)."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


class ChatContext:
    """One chat without its agents: id, log, pause, shells and its durable session.

    Made only as agent.py's ``AgentContext``, which adds agent 0 and then registers the
    chat (``_register``), so the registry never holds a chat without its agents."""

    _contexts: ClassVar[dict[str, ChatContext]] = {}
    _counter: ClassVar[int] = 0

    def __init__(
        self,
        config: AgentConfig,
        id: str | None,
        name: str | None,
        type: AgentContextType,
        *,
        session: Callable[[Self], ChatSession],
    ) -> None:
        self.id = id or new_context_id()
        self.name = name
        self.config = config
        self.type = type
        self.masker = ChatMasker(self)
        self.log = self.new_log()
        self._resume = asyncio.Event()
        self._resume.set()
        self.created_at = datetime.now(UTC)
        self.last_message = self.created_at
        ChatContext._counter += 1
        self.no = ChatContext._counter
        self.data: dict[str, Any] = {}
        self.output_data: dict[str, Any] = {}
        self.shells = ShellSessions(config.workdir_path())
        self.session: ChatSession = session(self)  # no chat exists without its session

    def new_log(self) -> Log:
        """An empty log whose items pass through the chat's masker."""
        return Log(masker=self.masker)

    def mask(self, value: Any) -> Any:
        """``value`` with every known secret replaced by ``§§secret(NAME)``."""
        return self.masker.mask(value)

    # -- registry -------------------------------------------------------------
    def _register(self) -> None:
        ChatContext._contexts[self.id] = self

    @classmethod
    def get(cls, id: str) -> Self | None:
        ctx = ChatContext._contexts.get(id)
        return ctx if isinstance(ctx, cls) else None

    @classmethod
    def all(cls) -> list[Self]:
        return [ctx for ctx in ChatContext._contexts.values() if isinstance(ctx, cls)]

    @classmethod
    def remove(cls, id: str) -> Self | None:
        """Delete a chat: its session stops it and journals that it is gone."""
        ctx = cls.get(id)
        if ctx is not None:
            del ChatContext._contexts[id]
            ctx.session.remove()
        return ctx

    @classmethod
    def unregister(cls, id: str, context: ChatContext) -> None:
        """Forget ``context`` without deleting it (its process is stopping)."""
        if ChatContext._contexts.get(id) is context:
            del ChatContext._contexts[id]

    # -- state ----------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return not self._resume.is_set()

    @paused.setter
    def paused(self, value: bool) -> None:
        if value:
            self._resume.clear()
        else:
            self._resume.set()

    async def wait_if_paused(self) -> None:
        await self._resume.wait()

    @property
    def task(self) -> asyncio.Task[str] | None:
        """The chat's one task (the session creates it)."""
        return self.session.task

    def is_running(self) -> bool:
        task = self.session.task
        return task is not None and not task.done()

    def close_shells(self) -> None:
        shells, self.shells = self.shells, ShellSessions(self.config.workdir_path())
        with contextlib.suppress(RuntimeError):  # no running loop: nothing was started
            asyncio.get_running_loop().create_task(shells.close_all())

    # -- control: the session owns the chat's life -----------------------------------
    def communicate(self, msg: UserMessage) -> asyncio.Task[str]:
        """Admit `msg` and run it, or hand it to the working agent as an intervention."""
        return self.session.communicate(msg)

    def nudge(self) -> asyncio.Task[str]:
        """Stop the run and continue on the working agent with a nudge message."""
        return self.session.nudge()

    def kill_process(self) -> None:
        self.session.stop()

    def reset(self) -> None:
        """Stop work and start the chat over (log, agents, shells)."""
        self.session.reset()

    def output(self) -> dict[str, Any]:
        """The chat's row in the poll snapshot."""
        return {
            "id": self.id,
            "name": self.name,
            "created_at": self.created_at.isoformat(),
            "no": self.no,
            "log_guid": self.log.guid,
            "log_version": self.log.version,
            "log_length": len(self.log.items),  # not output(): a dict per item per poll
            "paused": self.paused,
            "last_message": self.last_message.isoformat(),
            "type": self.type.value,
            "running": self.is_running(),
        }
