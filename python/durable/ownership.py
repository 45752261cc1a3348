"""Who runs a run: one ownership strategy per process, chosen once at start-up.

With SQLite this process owns every run of its journal (``LocalOwnership``: every question
has the same answer). With a shared PostgreSQL journal it owns only the runs it claims
(``SharedWorker``, python/durable/shared.py: claims, leases, fencing, the resources that move
with a run). The session, the driver, the decisions and the chats ask ``chats.ownership``
and never which kind it is. The ``Ownership`` Protocol itself is in python/durable/ports.py
(the lower modules name it without importing the chats).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from python.durable.ports import Ownership

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability.records import Call
    from python.durable.ports import Chats

__all__ = ["LocalOwnership", "Ownership"]


class LocalOwnership:
    """SQLite: this process owns every run of its journal."""

    others_may_run = False

    def __init__(self, chats: Chats) -> None:
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

    async def store_attachments(self, context: AgentContext, run_id: str, paths: list[str]) -> None:
        return None  # no other process continues the run

    async def after_iteration(self, context: AgentContext, run_id: str) -> None:
        return None

    async def named_chat(
        self, context_id: str, context: AgentContext | None
    ) -> AgentContext | None:
        return context

    async def chat_for_poll(self, context_id: str) -> AgentContext | None:
        return await self.chats.load(context_id)  # one start-up left for later is rebuilt now

    async def release(self, timeout: float) -> None:
        return None
