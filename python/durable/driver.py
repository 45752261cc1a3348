"""Driving a run to its end: the chain, its one error handler, finishing and holding.

``run_admitted`` starts a freshly admitted input (history, base checkpoint); ``drive``
runs the chain of the session's run until it is completed, failed, held or stopped (the
only place the chain's errors are handled); a Stop, reset or nudge ends the run with the
``stop`` decision, a server shutdown leaves it active for recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from durability.errors import (
    DurabilityError,
    FencingLost,
    InvalidTransition,
    OpenIntents,
    RunNotActive,
    StaleVersion,
)
from durability.integrity import Damage
from durability.status import DecisionKind, HoldReason, RunStatus
from durability.verdicts import Why
from python.durable import checkpoint, seams
from python.durable.run import ClaimLost, DurableHold, DurableRun
from python.helpers.errors import HandledException

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext, UserMessage
    from durability import Journal
    from durability.records import Run
    from python.durable.session import DurableSession

logger = logging.getLogger("a0.durable")
HELD = "Run held for a decision"
FAILED, COMPLETED = RunStatus.FAILED, RunStatus.COMPLETED


def held_text(reason: str | None, detail: Any = None) -> str:
    """The chat's warning for a held run; a damaged record is named."""
    text = f"This run waits for a person's decision (reason: {reason})."
    if reason == HoldReason.CORRUPT_RECORD and isinstance(detail, dict):
        skip = ("record", "reason", "code", "message")
        ids = {k: v for k, v in detail.items() if k not in skip}
        damage = Damage(str(detail.get("record")), str(detail.get("reason")), ids)
        text += f" A journaled record is damaged and was not used: {damage.describe()}."
    return text


def warn(context: AgentContext | None, heading: str, content: str, **kvps: Any) -> None:
    """A warning in the chat's log (nothing when the chat is not loaded)."""
    if context is not None:
        context.log.log(type="warning", heading=heading, content=content, kvps=kvps)


def warn_held(context: AgentContext | None, run_id: str, reason: str | None, detail: Any) -> None:
    """The chat's warning that its run waits for a person."""
    warn(context, HELD, held_text(reason, detail), run_id=run_id, reason=reason)


async def run_admitted(session: DurableSession, run: Run, msg: UserMessage, agent: Agent) -> str:
    """A freshly admitted input: history, base checkpoint, then the chain."""
    state = session.run = DurableRun(run.id, run.input_id, start_agent=agent.number)
    session.journaled = True
    agent.hist_add_user_message(msg)
    checkpoint.set_resume_base(session.context, state, agent, phase="start")

    async def base_checkpoint() -> None:
        await checkpoint.write(session.context, state, session.journal)
        if msg.attachments:  # for a worker that may take it over
            await session.chats.ownership.store_attachments(session, run.id, list(msg.attachments))

    return await drive(session, agent, resume=False, first=base_checkpoint)


async def drive(
    session: DurableSession,
    agent: Agent,
    *,
    resume: bool,
    first: Callable[[], Awaitable[None]] | None = None,
) -> str:
    """Run the chain of the session's run (after ``first``) to its end: completed, failed,
    held or stopped. The one place that handles the chain's errors."""
    run_id = session.current_run().run_id
    session.last_run_id = run_id
    try:
        return await _drive(session, agent, resume=resume, first=first)
    except FencingLost as exc:  # a write outside the seams (the run's end) was refused
        reason = str(exc.fields.get("reason") or "fencing_lost")
        claim_lost(session, ClaimLost(run_id, f"write refused: {reason}"))
        return ""
    finally:
        session.run = None  # the run is over (or held): no journaling outside it


def claim_lost(session: DurableSession, lost: ClaimLost) -> None:
    """A shared worker lost the run's claim: it writes nothing more for the run and leaves
    it active for the worker that holds it now (python/durable/shared.py)."""
    session.chats.ownership.claim_lost(lost.run_id, lost.reason)
    logger.warning("run %s stopped on this worker: claim lost (%s)", lost.run_id, lost.reason)
    session.context.log.log(
        type="warning",
        heading="Run moved to another worker",
        content="This worker no longer holds the run's claim; it started nothing more for "
        f"it (reason: {lost.reason}). The worker that holds the claim continues it.",
        kvps={"run_id": lost.run_id, "reason": lost.reason},
    )


async def stopped(session: DurableSession, run_id: str) -> None:
    """The run's task was cancelled: a Stop, reset or nudge ends the run (``stop``); a
    server shutdown (or a shared worker's lost claim) leaves it active for recovery."""
    if not session.chats.keeps_open(run_id):
        await asyncio.shield(asyncio.to_thread(stop_quietly, session.journal, run_id))


async def _drive(
    session: DurableSession,
    agent: Agent,
    *,
    resume: bool,
    first: Callable[[], Awaitable[None]] | None,
) -> str:
    run = session.current_run()
    try:
        if first is not None:
            await first()
        response = await session.context.chain(agent, resume=resume)
    except ClaimLost as lost:
        claim_lost(session, lost)
        return ""
    except DurableHold as hold:
        warn_held(session.context, run.run_id, hold.reason, hold.detail)
        return ""
    except asyncio.CancelledError:
        await stopped(session, run.run_id)
        raise
    except HandledException as e:
        await _finish(session, str(e), failed=True)
        return str(e)
    except Exception as e:
        try:
            agent.log_error(e)
        except HandledException as handled:
            await _finish(session, str(handled), failed=True)
            return str(handled)
        return "Error"
    await _finish(session, response, failed=False)
    return response


async def _finish(session: DurableSession, response: str, *, failed: bool) -> None:
    run, journal = session.current_run(), session.journal
    open_calls = await journal.aio.open_intents(run.run_id)
    if open_calls:  # never end a run whose call has no journaled outcome: hold it instead
        reason = HoldReason.UNCERTAIN_CALL
        detail = {**seams.position(open_calls[-1]), "why": Why.RUN_ENDED_WITH_OPEN_CALL}
        with contextlib.suppress(InvalidTransition):
            await journal.aio.mark_needs_attention(run.run_id, reason, detail)
        content = (
            "The run ended with a call whose outcome is not journaled; it waits "
            f"for a person's decision (reason: {reason})."
        )
        warn(session.context, HELD, content, run_id=run.run_id, reason=reason)
        return
    payload = {"response": response, "failed": failed}
    await journal.aio.append_event(session.context.id, "run_result", payload, run_id=run.run_id)
    try:
        await journal.aio.set_run_status(run.run_id, FAILED if failed else COMPLETED)
    except (OpenIntents, InvalidTransition, RunNotActive) as exc:
        logger.warning("run %s could not be closed: %s", run.run_id, exc.code)


def stop_quietly(journal: Journal, run_id: str) -> None:
    """The chat was stopped (Stop, reset, nudge): end the run, abandoning open calls.
    A journal write of the cancelled step may still land meanwhile: retry on its version."""
    for _ in range(10):
        try:
            run = journal.get_run(run_id)
            if run.is_open:
                journal.decide(run_id, DecisionKind.STOP, version=run.version, actor="user:stop")
            return
        except StaleVersion:
            continue
        except DurabilityError as exc:
            logger.warning("run %s could not be stopped: %s", run_id, exc.code)
            return
    logger.warning("run %s could not be stopped: its version kept changing", run_id)
