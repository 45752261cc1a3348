"""Start-up: rebuild the chats from the journal, recover their runs, resume a run.

``restore_contexts(chats)`` rebuilds one chat per journaled context from its latest
checkpoint and the calls journaled after it; ``await recover(chats, adapters=...)``
classifies every open run (durability/recovery.py), holds what it cannot prove and resumes
the rest through ``resume_run`` (two at a time), which is also how a decision continues a
held run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agent import AgentContext, UserMessage
from durability import integrity, recovery
from durability.errors import CorruptCheckpoint, CorruptRecord, DurabilityError
from python.durable import checkpoint, restored_log
from python.durable.driver import HELD, drive, held_text, stopped
from python.durable.run import DurableRun
from python.durable.session import DurableSession, session_of

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability import Journal
    from durability.records import Event, Run
    from python.durable.chats import DurableChats

logger = logging.getLogger("a0.durable")
CHAT_EVENTS = ("context_removed", "context_reset")


def _warn(context: AgentContext | None, heading: str, content: str, **kvps: Any) -> None:
    if context is not None:
        context.log.log(type="warning", heading=heading, content=content, kvps=kvps)


def restore_contexts(chats: DurableChats) -> list[AgentContext]:
    """One chat per journaled context, rebuilt from its latest checkpoint (oldest chat
    first) plus the log items of the calls journaled after it (python/durable/
    restored_log.py); a chat deleted after its newest run is not rebuilt."""
    journal = chats.journal
    newest_run: dict[str, float] = {}
    for run in reversed(journal.list_runs(limit=1_000_000)):  # oldest chat first
        newest_run[run.context_id] = run.created_at
    events = {cid: _chat_events(journal, cid) for cid in newest_run}
    context_ids = [
        cid for cid, at in newest_run.items() if _last(events[cid], "context_removed") < at
    ]
    restored = []
    for context_id in context_ids:
        try:
            context = _restore_one(chats, context_id, events[context_id])
        except Exception as exc:  # one chat that cannot be rebuilt never stops the others
            failed = _restore_failed(chats, context_id, exc)
            if failed is None:
                continue
            context = failed
        session_of(context).journaled = True
        restored.append(context)
    return restored


def _restore_one(chats: DurableChats, context_id: str, events: list[Event]) -> AgentContext:
    journal = chats.journal
    context = chats.get(context_id) or chats.create(context_id)
    try:
        latest = journal.latest_context_checkpoint(context_id, histories=checkpoint.current_chains)
    except CorruptCheckpoint as exc:
        latest = None
        text = "The chat's latest checkpoint failed validation; it could not be rebuilt."
        _warn(context, "Checkpoint damaged", text, reason=exc.fields.get("reason"))
    if latest is not None and _last(events, "context_reset") < latest.created_at:
        state = latest.state.get("current") or {}
        checkpoint.restore_chain(context, state, latest.histories)
        restored_log.append_after_checkpoint(context, journal, latest)
    return context


def _restore_failed(chats: DurableChats, context_id: str, exc: Exception) -> AgentContext | None:
    """The chat could not be rebuilt: hold its open run (recovery_error) and show the chat
    empty, with a warning, so a person can decide."""
    detail = recovery.error_detail(exc, "restore")
    logger.warning("chat %s could not be rebuilt: %s", context_id, detail["type"])
    run_id = _hold_open_run(chats.journal, context_id, "recovery_error", detail)
    try:
        context = chats.get(context_id) or chats.create(context_id)
    except Exception as again:
        logger.warning("chat %s left out: %s", context_id, type(again).__name__)
        return None
    text = f"This chat could not be rebuilt from the journal ({detail['type']}); " + (
        "its run waits for a person's decision." if run_id else "it is shown empty."
    )
    _warn(context, "Chat not rebuilt", text, run_id=run_id, reason="recovery_error")
    return context


def _hold_open_run(journal: Journal, context_id: str, reason: str, detail: Any) -> str | None:
    """Hold the chat's active run (if any) for a person; never raises."""
    try:
        run = journal.active_run(context_id)
        if run is None:
            return None
        if run.status == "active":
            journal.mark_needs_attention(run.id, reason, detail)
        return run.id
    except Exception as exc:
        logger.warning("run of chat %s could not be held: %s", context_id, type(exc).__name__)
        return None


def _chat_events(journal: Journal, context_id: str) -> list[Event]:
    events = journal.list_events(context_id=context_id, limit=1_000_000, verify=False)
    return [e for e in events if e.type in CHAT_EVENTS]  # their time only


def _last(events: list[Event], event_type: str) -> float:
    """When the chat last had this event (-1 when never)."""
    return max((e.created_at for e in events if e.type == event_type), default=-1.0)


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
            if plan.action in ("hold", "skip"):
                run = plan.run
                text = held_text(run.reason, run.reason_detail)
                _warn(context, HELD, text, run_id=run.id, reason=run.reason)
            elif plan.action == "resume" and context is not None:
                resume_run(session_of(context), plan.run.id, plan.permits)
        except Exception as exc:  # one run that cannot be resumed never stops the others
            detail = recovery.error_detail(exc, "resume")
            held = (journal, plan.run.context_id, "recovery_error", detail)
            await asyncio.to_thread(_hold_open_run, *held)
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
            reason, detail = "corrupt_record", exc.to_dict()
        else:
            reason, detail = "recovery_error", recovery.error_detail(exc, "resume")
        session.run = None
        try:
            await session.journal.aio.mark_needs_attention(run_id, reason, detail)
        except DurabilityError as again:
            logger.warning("run %s could not be held: %s", run_id, again.code)
        text = held_text(reason, detail)
        _warn(session.context, HELD, text, run_id=run_id, reason=reason)
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
    if run.status != "active":
        return None
    calls = await journal.aio.list_calls(run_id)
    known = {c.id for c in calls}
    state = DurableRun(run_id, run.input_id, permits=permits, known_calls=known)
    try:
        latest = await journal.aio.latest_checkpoint(run_id)
    except CorruptCheckpoint as exc:
        await journal.aio.mark_needs_attention(run_id, "corrupt_checkpoint", exc.to_dict())
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
