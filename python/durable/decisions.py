"""A person's decisions on held runs and retry grants, acted on in the chat.

``apply_decision`` records the decision (``stale_version``, ``note_required``,
``run_not_held`` propagate) and, when the run is active again and its chat idle, resumes
it in the chat's task (``DurableSession.resume``; a shared worker only when it holds or
wins the run's claim: else the worker holding it resumes it, python/durable/shared.py);
``stop`` on a working chat stops its task too. ``grant_retries`` allows failed model calls
to be asked again; a run held at a model call retries it at once (``retry_model_call``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from durability import decision_fit
from durability.decision_fit import RETRY_MODEL_CALL
from durability.errors import DecisionNotApplicable, RunNotHeld, StaleVersion
from durability.records import DecisionOutcome, DecisionRequest, RetryGrant
from durability.status import DecisionKind, RunStatus
from python.durable.session import session_of

if TYPE_CHECKING:  # pragma: no cover
    from python.durable.chats import DurableChats


async def apply_decision(chats: DurableChats, request: DecisionRequest) -> DecisionOutcome:
    """Record a person's decision and act on it in the run's chat (when loaded here).
    ``retry_model_call`` grants ``request.attempts`` retries and runs the held model call
    again."""
    outcome = await chats.journal.aio.decide(request)
    context = chats.get(outcome.run.context_id)
    if not outcome.applied or context is None:
        return outcome
    run_id, decision, actor = request.run_id, request.decision, request.actor
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
    detail = await journal.aio.read_run(run_id)
    if decision_fit.held_model_call(detail.run, detail.calls) is not None:
        try:  # a held model call: retry it now (the decision records the grant)
            version = detail.run.version
            retry = DecisionRequest(
                run_id, RETRY_MODEL_CALL, version=version, actor=actor, attempts=attempts
            )
            await apply_decision(chats, retry)
            return (await journal.aio.list_retry_grants(run_id))[-1]
        except (StaleVersion, RunNotHeld, DecisionNotApplicable):
            pass  # someone decided first: a plain grant stays for the next attempt
    return await journal.aio.grant_retries(run_id, attempts, actor=actor)
