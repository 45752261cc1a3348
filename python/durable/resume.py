"""Start-up: recover the runs of the rebuilt chats.

The chats are rebuilt first (python/durable/rebuild.py); ``await recover(chats, adapters=...)``
classifies every open run (durability/recovery.py), holds what it cannot prove and resumes
the rest through ``DurableSession.resume`` (two at a time), the one way a journaled run
continues (a takeover and a decision use it too).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from durability import recovery
from durability.status import HoldReason, PlanAction
from python.durable import grants
from python.durable.notices import warn_held
from python.durable.rebuild import hold_open_run
from python.durable.session import session_of

if TYPE_CHECKING:  # pragma: no cover
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.durable")


async def recover(
    chats: DurableChats, *, adapters: Mapping[str, recovery.Adapter] | None = None
) -> list[recovery.RecoveryPlan]:
    """Classify every open run; hold what cannot be proven, resume the rest (two at a time)."""
    journal = chats.journal
    scan = recovery.scan
    plans = await asyncio.to_thread(
        scan,
        journal,
        adapters=adapters,
        is_safe=chats.policy.shipped_is_safe,
        scopes_of=grants.for_recovery(chats),
    )
    for plan in plans:
        context = chats.get(plan.run.context_id)
        try:
            if plan.action in (PlanAction.HOLD, PlanAction.SKIP):
                run = plan.run
                warn_held(context, run.id, run.reason, run.reason_detail)
            elif plan.action == PlanAction.RESUME and context is not None:
                session_of(context).resume(plan.run.id, plan.permits)
        except Exception as exc:  # one run that cannot be resumed never stops the others
            detail = recovery.error_detail(exc, "resume")
            held = (journal, plan.run.context_id, HoldReason.RECOVERY_ERROR, detail)
            await asyncio.to_thread(hold_open_run, *held)
    return plans
