"""Start-up: recover the runs of the rebuilt chats, resume a run.

The chats are rebuilt first (python/durable/rebuild.py); ``await recover(chats, adapters=...)``
classifies every open run (durability/recovery.py), holds what it cannot prove and resumes
the rest through ``resume_run`` (two at a time), which is also how a decision continues a
held run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from agent import UserMessage
from durability import integrity, recovery
from durability.errors import CorruptCheckpoint, CorruptRecord, DurabilityError
from durability.status import HoldReason, PlanAction, RunStatus
from durability.verdicts import Evidence, judge
from python.durable import checkpoint
from python.durable.driver import drive, stopped, warn_held
from python.durable.rebuild import hold_open_run
from python.durable.run import DurableRun
from python.durable.session import DurableSession, session_of

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability.records import Run
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.durable")


async def recover(
    chats: DurableChats, *, adapters: Mapping[str, recovery.Adapter] | None = None
) -> list[recovery.RecoveryPlan]:
    """Classify every open run; hold what cannot be proven, resume the rest (two at a time)."""
    journal = chats.journal
    scan = recovery.scan
    plans = await asyncio.to_thread(
        scan, journal, adapters=adapters, is_safe=chats.policy.shipped_is_safe
    )
    for plan in plans:
        context = chats.get(plan.run.context_id)
        try:
            if plan.action in (PlanAction.HOLD, PlanAction.SKIP):
                run = plan.run
                warn_held(context, run.id, run.reason, run.reason_detail)
            elif plan.action == PlanAction.RESUME and context is not None:
                resume_run(session_of(context), plan.run.id, plan.permits)
        except Exception as exc:  # one run that cannot be resumed never stops the others
            detail = recovery.error_detail(exc, "resume")
            held = (journal, plan.run.context_id, HoldReason.RECOVERY_ERROR, detail)
            await asyncio.to_thread(hold_open_run, *held)
    return plans


def resume_run(
    session: DurableSession, run_id: str, permits: Mapping[str, str] | None = None
) -> asyncio.Task[str]:
    """Continue a journaled run from its resume base in the chat's task, replaying
    committed calls."""
    return session.spawn(_resume(session, run_id, dict(permits or {})), run_id=run_id)


async def _resume(session: DurableSession, run_id: str, permits: dict[str, str]) -> str:
    slots = session.chats.resume_slots
    try:
        await slots.acquire()
    except asyncio.CancelledError:  # stopped while waiting for a slot
        await stopped(session, run_id)
        raise
    try:
        return await _resume_in_slot(session, run_id, permits)
    finally:
        slots.release()


async def _resume_in_slot(session: DurableSession, run_id: str, permits: dict[str, str]) -> str:
    try:
        prepared = await _prepare_resume(session, run_id, permits)
    except asyncio.CancelledError:  # stopped while the run was being rebuilt
        session.run = None
        await stopped(session, run_id)
        raise
    except Exception as exc:  # rebuilding this run failed: hold it, the others go on
        if isinstance(exc, CorruptRecord):
            verdict = judge(None, Evidence(record_damage=exc.to_dict()))
            reason, detail = str(verdict.reason), verdict.hold_detail()
        else:
            reason, detail = HoldReason.RECOVERY_ERROR, recovery.error_detail(exc, "resume")
        session.run = None
        try:
            await session.journal.aio.mark_needs_attention(run_id, reason, detail)
        except DurabilityError as again:
            logger.warning("run %s could not be held: %s", run_id, again.code)
        warn_held(session.context, run_id, reason, detail)
        return ""
    if prepared is None:
        return ""
    agent, resume = prepared
    return await drive(session, agent, resume=resume)


async def _prepare_resume(
    session: DurableSession, run_id: str, permits: dict[str, str]
) -> tuple[Agent, bool] | None:
    """Rebuild the chain a run resumes from: (agent to drive, resume?) or None (not active)."""
    journal, context = session.journal, session.context
    run = await journal.aio.get_run(run_id)
    if run.status != RunStatus.ACTIVE:
        return None
    calls = await journal.aio.list_calls(run_id)
    known = {c.id for c in calls}
    state = DurableRun(run_id, run.input_id, permits=permits, known_calls=known)
    try:
        latest = await journal.aio.latest_checkpoint(run_id)
    except CorruptCheckpoint as exc:
        verdict = judge(None, Evidence(checkpoint_damage=exc.to_dict()))
        await journal.aio.mark_needs_attention(run_id, str(verdict.reason), verdict.hold_detail())
        return None
    if latest is None:
        return await _restart_from_input(session, state, run)
    base = latest.state.get("resume") or {}
    prefix = checkpoint.RESUME_PREFIX
    histories = {k[len(prefix) :]: v for k, v in latest.histories.items() if k.startswith(prefix)}
    checkpoint.restore_chain(context, base, histories)
    state.seq = {int(k): int(v) for k, v in (base.get("seq") or {}).items()}
    state.start_agent = int(base.get("start_agent", 0))
    state.resume_base = (base, histories)
    session.run = state
    agent = checkpoint.agent_by_number(context, int(base.get("resume_agent", 0)))
    return agent, base.get("phase") == "iteration"


async def _restart_from_input(
    session: DurableSession, state: DurableRun, run: Run
) -> tuple[Agent, bool]:
    """Admitted but no checkpoint yet: the chat's last state plus the journaled input."""
    journal, context = session.journal, session.context
    previous = await journal.aio.latest_context_checkpoint(
        context.id, histories=checkpoint.current_chains
    )
    if previous is not None:
        current = previous.state.get("current") or {}
        checkpoint.restore_chain(context, current, previous.histories)
    events = await journal.aio.list_events(run_id=run.id, limit=1000, verify=False)
    first = next((e for e in events if e.type == "input"), None)
    payload = integrity.require_event(first).payload if first is not None else {}
    message = payload.get("message") if isinstance(payload, dict) else None
    message = message if isinstance(message, dict) else {}
    system = [str(s) for s in message.get("system_message") or []]
    msg = UserMessage(str(message.get("message") or ""), system_message=system, id=run.input_id)
    session.run = state
    agent = context.agent0
    agent.hist_add_user_message(msg)
    checkpoint.set_resume_base(context, state, agent, phase="start")
    await checkpoint.write(context, state, journal)
    return agent, False
