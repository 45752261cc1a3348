"""Start-up and decisions: rebuild chats from the journal, recover runs, act on decisions.

What run_ui.py needs at start-up::

    journal = Journal.open_sqlite(usr / "durability" / "journal.sqlite", masker=...)
    contexts = restore_contexts(journal, runtime.agent_config)
    plans = await recover(journal)          # holds what it cannot prove, resumes the rest
    ... AgentContext(config, journal=journal) for new chats; durable.submit(ctx, msg) ...
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from durability import integrity, recovery
from durability.errors import CorruptCheckpoint, CorruptRecord, DurabilityError
from durability.records import DecisionOutcome, RetryGrant
from python.durable import checkpoint as durable_checkpoint
from python.durable import seams as durable

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability import Journal

logger = logging.getLogger("a0.durable")

MAX_PARALLEL_RESUMES = 2
_slots: dict[int, asyncio.Semaphore] = {}


def resume_slots() -> asyncio.Semaphore:
    """At most two runs resume at a time (per event loop)."""
    loop = asyncio.get_running_loop()
    slot = _slots.get(id(loop))
    if slot is None:
        _slots.clear()
        slot = _slots[id(loop)] = asyncio.Semaphore(MAX_PARALLEL_RESUMES)
    return slot


def _warn(context: AgentContext | None, heading: str, content: str, **kvps: Any) -> None:
    if context is not None:
        context.log.log(type="warning", heading=heading, content=content, kvps=kvps)


def restore_contexts(
    journal: Journal, config_factory: Callable[[], Any], *, receipts: Any = None
) -> list[AgentContext]:
    """One chat per journaled context, rebuilt from its latest checkpoint (oldest chat
    first). ``receipts`` (durability.adapters.ShellReceipts) is given to every chat."""

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
            context = _restore_one(journal, context_id, config_factory, events[context_id])
        except Exception as exc:  # one chat that cannot be rebuilt never stops the others
            context = _restore_failed(journal, context_id, config_factory, exc)
            if context is None:
                continue
        if receipts is not None:
            context.receipts = receipts
        restored.append(context)
    return restored


def _restore_one(
    journal: Journal, context_id: str, config_factory: Callable[[], Any], events: list[Any]
) -> AgentContext:
    from agent import AgentContext

    context = AgentContext.get(context_id)
    if context is None:
        context = AgentContext(config_factory(), id=context_id, journal=journal)
    context.journal = journal
    try:
        checkpoint = journal.latest_context_checkpoint(context_id)
    except CorruptCheckpoint as exc:
        checkpoint = None
        reason = exc.fields.get("reason")
        text = "The chat's latest checkpoint failed validation; it could not be rebuilt."
        _warn(context, "Checkpoint damaged", text, reason=reason)
    if checkpoint is not None and _last(events, "context_reset") < checkpoint.created_at:
        state = checkpoint.state.get("current") or {}
        durable_checkpoint.restore_chain(context, state, checkpoint.histories)
    return context


def _restore_failed(
    journal: Journal, context_id: str, config_factory: Callable[[], Any], exc: Exception
) -> AgentContext | None:
    """The chat could not be rebuilt: hold its open run (recovery_error) and show the chat
    empty, with a warning, so a person can decide."""
    from agent import AgentContext

    detail = recovery.error_detail(exc, "restore")
    logger.warning("chat %s could not be rebuilt: %s", context_id, detail["type"])
    run_id = _hold_open_run(journal, context_id, "recovery_error", detail)
    try:
        context = AgentContext(config_factory(), id=context_id, journal=journal)
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


def _chat_events(journal: Journal, context_id: str) -> list[Any]:
    events = journal.list_events(context_id=context_id, limit=1_000_000, verify=False)
    return [e for e in events if e.type in ("context_removed", "context_reset")]  # time only


def _last(events: list[Any], event_type: str) -> float:
    """When the chat last had this event (-1 when never)."""
    return max((e.created_at for e in events if e.type == event_type), default=-1.0)


async def recover(
    journal: Journal, *, adapters: Mapping[str, recovery.Adapter] | None = None
) -> list[recovery.RecoveryPlan]:
    """Classify every open run; hold what cannot be proven, resume the rest (two at a time)."""
    from agent import AgentContext

    plans = await asyncio.to_thread(recovery.scan, journal, adapters=adapters)
    for plan in plans:
        context = AgentContext.get(plan.run.context_id)
        try:
            if plan.action in ("hold", "skip"):
                run = plan.run
                text = durable.held_text(run.reason, run.reason_detail)
                _warn(context, "Run held for a decision", text, run_id=run.id, reason=run.reason)
            elif plan.action == "resume" and context is not None:
                resume_run(context, plan.run.id, plan.permits)
        except Exception as exc:  # one run that cannot be resumed never stops the others
            detail = recovery.error_detail(exc, "resume")
            held = (journal, plan.run.context_id, "recovery_error", detail)
            await asyncio.to_thread(_hold_open_run, *held)
    return plans


def resume_run(
    context: AgentContext, run_id: str, permits: Mapping[str, str] | None = None
) -> asyncio.Task:
    """Continue a journaled run from its resume base, replaying committed calls."""
    task = asyncio.get_running_loop().create_task(
        _resume(context, run_id, dict(permits or {})), name=f"chat-{context.id}"
    )
    context.task = task
    return task


async def _resume(context: AgentContext, run_id: str, permits: dict[str, str]) -> str:
    journal = context.journal
    async with resume_slots():
        try:
            prepared = await _prepare_resume(context, run_id, permits)
        except Exception as exc:  # rebuilding this run failed: hold it, the others go on
            if isinstance(exc, CorruptRecord):
                reason, detail = "corrupt_record", exc.to_dict()
            else:
                reason, detail = "recovery_error", recovery.error_detail(exc, "resume")
            context.durable_run = None
            try:
                await journal.aio.mark_needs_attention(run_id, reason, detail)
            except DurabilityError as again:
                logger.warning("run %s could not be held: %s", run_id, again.code)
            text = durable.held_text(reason, detail)
            _warn(context, "Run held for a decision", text, run_id=run_id, reason=reason)
            return ""
        if prepared is None:
            return ""
        agent, resume = prepared
        return await durable.drive(context, agent, resume=resume)


async def _prepare_resume(
    context: AgentContext, run_id: str, permits: dict[str, str]
) -> tuple[Any, bool] | None:
    """Rebuild the chain a run resumes from: (agent to drive, resume?) or None (not active)."""
    journal = context.journal
    run = await journal.aio.get_run(run_id)
    if run.status != "active":
        return None
    calls = await journal.aio.list_calls(run_id)
    state = durable.DurableRun(run_id, run.input_id, permits=permits,
                               known_calls={c.id for c in calls})  # fmt: skip
    try:
        checkpoint = await journal.aio.latest_checkpoint(run_id)
    except CorruptCheckpoint as exc:
        await journal.aio.mark_needs_attention(run_id, "corrupt_checkpoint", exc.to_dict())
        return None
    context.model_calls = context.tool_calls = 0
    if checkpoint is None:
        return await _restart_from_input(context, state, run)
    base = checkpoint.state.get("resume") or {}
    prefix = durable_checkpoint.RESUME_PREFIX
    histories = {
        k[len(prefix) :]: v for k, v in checkpoint.histories.items() if k.startswith(prefix)
    }
    durable_checkpoint.restore_chain(context, base, histories)
    state.seq = {int(k): int(v) for k, v in (base.get("seq") or {}).items()}
    state.start_agent = int(base.get("start_agent", 0))
    state.resume_base = (base, histories)
    context.durable_run = state
    agent = durable_checkpoint.agent_by_number(context, int(base.get("resume_agent", 0)))
    return agent, base.get("phase") == "iteration"


async def _restart_from_input(
    context: AgentContext, state: durable.DurableRun, run: Any
) -> tuple[Any, bool]:
    """Admitted but no checkpoint yet: the chat's last state plus the journaled input."""
    from agent import UserMessage

    journal = context.journal
    previous = await journal.aio.latest_context_checkpoint(context.id)
    if previous is not None:
        current = previous.state.get("current") or {}
        durable_checkpoint.restore_chain(context, current, previous.histories)
    events = await journal.aio.list_events(run_id=run.id, limit=1000, verify=False)
    first = next((e for e in events if e.type == "input"), None)
    payload = integrity.require_event(first).payload if first is not None else {}
    message = payload.get("message") if isinstance(payload, dict) else None
    message = message if isinstance(message, dict) else {}
    msg = UserMessage(
        str(message.get("message") or ""),
        system_message=[str(s) for s in message.get("system_message") or []],
        id=run.input_id,
    )
    context.durable_run = state
    agent = context.agent0
    agent.hist_add_user_message(msg)
    durable_checkpoint.set_resume_base(context, agent, phase="start")
    await durable_checkpoint.write(context)
    return agent, False


async def apply_decision(
    journal: Journal, run_id: str, decision: str, *, version: int, actor: str,
    note: str | None = None, call_id: str | None = None,
) -> DecisionOutcome:  # fmt: skip
    """Record a person's decision (StaleVersion, NoteRequired, ... propagate) and act on it:
    a run that becomes active again is resumed in its chat."""
    from agent import AgentContext

    outcome = await journal.aio.decide(
        run_id, decision, version=version, actor=actor, note=note, call_id=call_id
    )
    context = AgentContext.get(outcome.run.context_id)
    if outcome.applied and context is not None:
        context.log.log(
            type="info", heading=f"Decision: {decision}",
            content=f"{actor} decided '{decision}' for the held run.",
            kvps={"run_id": run_id, "decision": decision},
        )  # fmt: skip
        if decision == "stop" and context.is_running():
            context.kill_process()  # the run ended: stop its task too
        elif outcome.run.status == "active" and not context.is_running():
            context.journal = journal
            resume_run(context, run_id)
    return outcome


async def grant_retries(journal: Journal, run_id: str, attempts: int, *, actor: str) -> RetryGrant:
    """Grant retries of failed model calls; a run held for one (model_failed) resumes."""
    grant = await journal.aio.grant_retries(run_id, attempts, actor=actor)
    run = await journal.aio.get_run(run_id)
    if run.status == "needs_attention" and run.reason == "model_failed":
        try:
            await apply_decision(journal, run_id, "resume", version=run.version, actor=actor)
        except DurabilityError:
            pass  # someone decided first; the grant stays for the next attempt
    return grant
