"""What the glue's lower modules see of the process's chats: two Protocols, no imports back.

``DurableChats`` (python/durable/chats.py) makes the sessions, the scheduler and the chats
rebuilt from the journal, so those modules may not import it, not even for a type (issue
#18: python/durable has no import circle even counting ``TYPE_CHECKING`` imports). They
name ``Chats`` instead: the part of ``DurableChats`` they use. ``Ownership`` is the strategy
that decides who runs which run (``LocalOwnership`` in python/durable/ownership.py, the
shared worker in python/durable/shared.py).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import asyncio

    from agent import AgentConfig, AgentContext, AgentContextType, UserMessage
    from durability import Journal
    from durability.adapters.evidence import ShellEvidence
    from durability.adapters.shell import ShellReceipts
    from durability.records import Call
    from python.durable.admission import Submission, SubmitOptions
    from python.durable.idle import IdleMap, IdleSummaries
    from python.durable.policy import ReplayPolicy
    from python.helpers.scheduler import TaskScheduler


@runtime_checkable
class Ownership(Protocol):
    #: A run the journal holds open that this process does not run may be running on
    #: another worker (a message to its chat joins it there as an intervention).
    others_may_run: bool

    async def gate(self, call: Call) -> None:
        """Right before an effect starts (its intent is durable): raise FencingLost
        unless this process may start it."""

    def keeps_open(self, run_id: str) -> bool:
        """True for a run whose task was cancelled here but which stays active (its claim
        went to another worker)."""

    def run_ended(self, run_id: str) -> None:
        """The run's task ended here."""

    def claim_lost(self, run_id: str, why: str) -> None:
        """The run is not this process's any more: stop it here, write nothing for it."""

    async def take(self, run_id: str) -> bool:
        """A decision made the run active again: True when it may resume here."""

    async def store_attachments(self, context: AgentContext, run_id: str, paths: list[str]) -> None:
        """A new run's attachments, kept for a process that may continue the run."""

    async def after_iteration(self, context: AgentContext, run_id: str) -> None:
        """After each checkpoint of a run (its work folder, for a process that may
        continue it)."""

    async def named_chat(
        self, context_id: str, context: AgentContext | None
    ) -> AgentContext | None:
        """The chat a request names, given the one loaded here (None: not loaded)."""

    async def chat_for_poll(self, context_id: str) -> AgentContext | None:
        """The chat a poll shows."""

    async def release(self, timeout: float) -> None:
        """Shutting down: once the chats' tasks ended (at most ``timeout`` seconds), give
        up what this process holds."""


class Chats(Protocol):
    """The part of ``DurableChats`` the sessions, the run scope, the scheduler, the rebuild
    and the new chats use."""

    @property
    def journal(self) -> Journal: ...
    @property
    def receipts(self) -> ShellReceipts | None: ...
    @property
    def evidence(self) -> ShellEvidence | None: ...
    @property
    def policy(self) -> ReplayPolicy: ...
    @property
    def ownership(self) -> Ownership: ...
    @property
    def scheduler(self) -> TaskScheduler: ...
    @property
    def stopping(self) -> bool: ...
    @property
    def config(self) -> Callable[[], AgentConfig]: ...
    @property
    def opening(self) -> asyncio.Lock: ...
    @property
    def resume_slots(self) -> asyncio.Semaphore: ...

    def create(
        self,
        id: str | None = None,
        name: str | None = None,
        *,
        config: AgentConfig | None = None,
        type: AgentContextType = ...,
    ) -> AgentContext: ...
    def next_chat_names(self, count: int) -> list[str]: ...
    def get(self, context_id: str) -> AgentContext | None: ...
    async def load(self, context_id: str) -> AgentContext | None: ...
    def is_deferred(self, context_id: str) -> bool: ...
    def defer(self, idle: IdleMap | IdleSummaries) -> None: ...
    async def settled(self) -> None: ...
    def forget(self, context: AgentContext) -> None: ...
    def keeps_open(self, run_id: str) -> bool: ...
    def in_background(self, work: Coroutine[Any, Any, Any]) -> None: ...
    async def submit(
        self, context_id: str, message: UserMessage, options: SubmitOptions = ...
    ) -> tuple[AgentContext | None, Submission]: ...
