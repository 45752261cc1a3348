"""What the agent loop needs from its chat's durable session.

agent.py types ``AgentContext.session`` with this Protocol; python/durable/session.py's
``DurableSession`` is the implementation (agent.py never imports python/durable). A chat
is built with a ``SessionFactory``: ``AgentContext(config, session=factory)`` calls it
with the new chat, so no chat exists without its session.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext, UserMessage
    from durability import Journal
    from durability.adapters.shell import ShellReceipts
    from python.helpers.models import ModelResult
    from python.helpers.scheduler import TaskScheduler
    from python.helpers.tool import Response, Tool

#: A model stream callback: ``(delta, full text so far)``.
StreamCallback = Callable[[str, str], Awaitable[None]]


@dataclass(frozen=True)
class ModelRequest:
    """One model call as the loop hands it to its session (``ChatSession.model_call``):
    the messages as sent, the model's role (``chat``, ``utility``, ...), the effect that
    asks the provider, the stream callbacks (a reused reply is streamed to them too) and
    ``preflight``, what is knowable before anything is sent."""

    messages: list[dict[str, str]]
    kind: str
    effect: Callable[[], Awaitable[ModelResult]]
    on_reasoning: StreamCallback | None = None
    on_response: StreamCallback | None = None
    preflight: Callable[[], Awaitable[None]] | None = None


class ChatSession(Protocol):
    """What the loop needs from its chat's durable session (python/durable/session.py)."""

    @property
    def task(self) -> asyncio.Task[str] | None: ...  # the chat's one task

    @property
    def journal(self) -> Journal: ...  # the tools read the chat's documents from it

    @property
    def receipts(self) -> ShellReceipts | None: ...  # shell receipts (code_execution_tool)

    @property
    def scheduler(self) -> TaskScheduler: ...  # the process's scheduler (the scheduler tool)

    def communicate(self, msg: UserMessage) -> asyncio.Task[str]: ...

    def nudge(self) -> asyncio.Task[str]: ...

    def stop(self) -> bool: ...  # cancel the chat's task (the run ends as stopped)

    def reset(self) -> None: ...

    def remove(self) -> None: ...

    async def model_call(self, agent: Agent, request: ModelRequest) -> ModelResult: ...

    async def embedding_call(
        self, agent: Agent, args: dict[str, Any], effect: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]: ...  # one embedding request, journaled (a pure read: replayed)

    async def tool_call(
        self, agent: Agent, tool: Tool, effect: Callable[[], Awaitable[Response]]
    ) -> Response: ...

    async def atomic_call(
        self, agent: Agent, name: str, args: Any, effect: Callable[[], Awaitable[Any]]
    ) -> Any: ...  # ``effect`` returns (result, writes): they commit in one transaction

    async def iteration_end(self, agent: Agent, *, final: bool) -> None: ...


#: Builds a new chat's session (python/durable/chats.py passes one).
SessionFactory = Callable[["AgentContext"], ChatSession]
