"""The ``journal_atomic`` replay class in the loop: an effect that lives in the journal's
own database commits in the same transaction as its call's result (DESIGN section 5).

Two callers: a memory tool (its writes in ``Tool.journal_writes``, committed by the tool
seam through ``results.commit_atomic``) and an extension of the loop that remembers or recalls
(``atomic_call``: recall, memorize), which has no Tool. Either way the call's intent is on
disk before the effect, the writes and the result commit together
(``Journal.commit_result_with``), and after a crash either both are there (the result is
reused, nothing runs again) or neither is: recovery permits the open call to run again
(``durability.verdicts``: ``journal_atomic`` -> ``run``) and nothing is held. Model calls
the effect makes are journaled calls of their own, at the positions after the intent, so a
call run again reuses their committed replies and the model is not asked twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from durability.status import CallKind, Policy
from durability.verdicts import Action, judge
from python.durable import results
from python.durable.recorded import RecordedToolError, fire
from python.helpers.errors import InterventionException

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from python.durable.seams import CallSeams

#: What an atomic effect returns: (its result, the writes that commit with it).
Outcome = tuple[Any, Sequence[Callable[[Any], Any]]]
Effect = Callable[[], Awaitable[Outcome]]


async def atomic_call(
    seams: CallSeams,
    agent: Agent,
    name: str,
    args: Any,
    effect: Effect,
) -> Any:
    """Journal one ``journal_atomic`` call of the loop itself (not a tool): its committed
    result when the journal has one, else run ``effect`` and commit what it returns."""
    call, _seq = await seams._intent(agent, CallKind.TOOL, name, args, Policy.JOURNAL_ATOMIC)
    verdict = judge(call, seams.evidence(call))
    if verdict.action is Action.HOLD:
        await seams._hold(verdict, call)
    if verdict.action is Action.REUSE:
        results.skip_nested(seams.state.seq, agent.number, call)
        committed = call.result if isinstance(call.result, dict) else {}
        return committed.get("result")
    if verdict.action is Action.FAIL:
        error = call.result if isinstance(call.result, dict) else {}
        raise RecordedToolError(str(error.get("message") or f"{name} failed"))
    if verdict.action is Action.ABANDONED:
        return None
    await seams.chats.ownership.gate(call)
    journal = seams.journal
    try:
        value, writes = await effect()
    except InterventionException:
        await journal.aio.commit_result(call.id, {"interrupted": True})
        raise
    except Exception as exc:
        await seams._failed(call, exc)
        raise
    fire("after_effect", name)
    end = seams.state.seq.get(agent.number, 0)
    result = {"result": value, results.NEXT_SEQ: end}
    await journal.aio.commit_result_with(call.id, result, list(writes))
    fire("after_result", name)
    return value
