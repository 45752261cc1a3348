"""Who runs a run: one ownership strategy per process, chosen once at start-up.

With SQLite this process owns every run of its journal (``LocalOwnership``: every question
has the same answer). With a shared PostgreSQL journal it owns only the runs it claims
(``SharedWorker``, python/durable/shared.py: claims, leases, fencing, the resources that move
with a run). The session, the driver, the decisions and the chats ask ``chats.ownership``
and never which kind it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability.records import Call
    from python.durable.chats import DurableChats
    from python.durable.session import DurableSession


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

    async def store_attachments(
        self, session: DurableSession, run_id: str, paths: list[str]
    ) -> None:
        """A new run's attachments, kept for a process that may continue the run."""

    async def after_iteration(self, session: DurableSession, run_id: str) -> None:
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


class LocalOwnership:
    """SQLite: this process owns every run of its journal."""

    others_may_run = False

    def __init__(self, chats: DurableChats) -> None:
        self.chats = chats

    async def gate(self, call: Call) -> None:
        return None  # every effect may start

    def keeps_open(self, run_id: str) -> bool:
        return False

    def run_ended(self, run_id: str) -> None:
        return None

    def claim_lost(self, run_id: str, why: str) -> None:
        return None  # there are no claims to lose

    async def take(self, run_id: str) -> bool:
        return True

    async def store_attachments(
        self, session: DurableSession, run_id: str, paths: list[str]
    ) -> None:
        return None  # no other process continues the run

    async def after_iteration(self, session: DurableSession, run_id: str) -> None:
        return None

    async def named_chat(
        self, context_id: str, context: AgentContext | None
    ) -> AgentContext | None:
        return context

    async def chat_for_poll(self, context_id: str) -> AgentContext | None:
        return await self.chats.load(context_id)  # one start-up left for later is rebuilt now

    async def release(self, timeout: float) -> None:
        return None
