"""A person's decisions on held runs and retry grants, acted on in the chat.

``apply_decision`` records the decision (``stale_version``, ``note_required``,
``run_not_held`` propagate) and, when the run is active again and its chat idle, resumes
it in the chat's task (``DurableSession.resume``; a shared worker only when it holds or
wins the run's claim: else the worker holding it resumes it, python/durable/shared.py);
``stop`` on a working chat stops its task too. ``grant_retries`` allows failed model calls
to be asked again and continues a run held for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durability.errors import DurabilityError
from durability.records import DecisionOutcome, RetryGrant
from durability.status import DecisionKind, HoldReason, RunStatus
from python.durable.session import session_of

if TYPE_CHECKING:  # pragma: no cover
    from python.durable.chats import DurableChats


async def apply_decision(
    chats: DurableChats,
    run_id: str,
    decision: str,
    *,
    version: int,
    actor: str,
    note: str | None = None,
    call_id: str | None = None,
) -> DecisionOutcome:
    """Record a person's decision and act on it in the run's chat (when loaded here)."""
    outcome = await chats.journal.aio.decide(
        run_id, decision, version=version, actor=actor, note=note, call_id=call_id
    )
    context = chats.get(outcome.run.context_id)
    if not outcome.applied or context is None:
        return outcome
    context.log.log(
        type="info",
        heading=f"Decision: {decision}",
        content=f"{actor} decided '{decision}' for the held run.",
        kvps={"run_id": run_id, "decision": decision},
    )
    session = session_of(context)
    if decision == DecisionKind.STOP and session.is_running():
        session.stop()  # the run ended: stop its task too
    elif (
        outcome.run.status == RunStatus.ACTIVE
        and not session.is_running()
        # a shared worker continues the run only with its claim; else its holder does
        and await chats.ownership.take(run_id)
    ):
        session.resume(run_id)
    return outcome


async def grant_retries(
    chats: DurableChats, run_id: str, attempts: int, *, actor: str
) -> RetryGrant:
    """Grant retries of failed model calls; a run held for one (model_failed) resumes."""
    journal = chats.journal
    grant = await journal.aio.grant_retries(run_id, attempts, actor=actor)
    run = await journal.aio.get_run(run_id)
    if run.status == RunStatus.NEEDS_ATTENTION and run.reason == HoldReason.MODEL_FAILED:
        try:
            resume = DecisionKind.RESUME
            await apply_decision(chats, run_id, resume, version=run.version, actor=actor)
        except DurabilityError:
            pass  # someone decided first; the grant stays for the next attempt
    return grant
