"""The two seams: every model call and every tool call of a run, journaled.

Each call takes the next sequence number of its agent in the run, commits its intent
before the effect and its result after; what the journal already holds at a position is
reused and never run again; what cannot be proven is held for a person (``DurableHold``).
Every loop iteration ends with a checkpoint (``iteration_end``). A safe-replay tool's result
and the checkpoint ride on the run's next write (the journal defers them; a model reply and
every other result are awaited). The failpoints of durability/failpoints.py sit at the five
boundaries of every call (docs/testing.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from durability import failpoints, paths
from durability.canonical import canonical_json, digest
from durability.errors import CorruptRecord, ReplayDivergence
from durability.status import CallKind, CallState, Permit, Policy
from durability.verdicts import Action, Evidence, Verdict, judge
from python.durable import checkpoint, results
from python.durable.policy import SUBORDINATE_TOOL
from python.durable.run import DurableHold, DurableRun
from python.helpers import files
from python.helpers.errors import InterventionException, RepairableException
from python.helpers.log import LogItem
from python.helpers.models import ModelError, ModelResult
from python.helpers.tool import Response, Tool

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability.records import Call
    from python.durable.session import DurableSession
    from python.helpers.chat_session import StreamCallback

MODEL_CALL_NAME = "model"
PERMITTED = (Permit.REPLAY, Permit.RUN)  # recovery permits that let an open call run again


class RecordedToolError(Exception):
    """A tool failure replayed from the journal (the tool is not run again)."""

    code = "tool_failed"


def fire(boundary: str, name: str) -> None:
    failpoints.failpoint(boundary, name, paths.state_dir(files.usr_dir()))


async def fire_after_deferred(session: DurableSession, boundary: str, name: str) -> None:
    """``fire`` after a write the journal may have deferred: an armed point first waits
    for it to be on disk, so ``after_result`` and ``after_checkpoint`` keep their meaning."""
    if failpoints.armed(boundary, name):
        await session.journal.aio.flush()
    fire(boundary, name)


def position(call: Call) -> dict[str, Any]:
    """Where a call sits in its run (the detail of a hold names it)."""
    return {
        "call_id": call.id,
        "agent_no": call.agent_no,
        "seq": call.seq,
        "kind": call.kind,
        "name": call.name,
    }


async def _intent(
    session: DurableSession, agent: Agent, kind: str, name: str, args: Any, policy: str
) -> tuple[Call, int]:
    """Commit the intent at the agent's next position; (the call, its sequence number)."""
    run = session.current_run()
    seq = run.take_seq(agent.number)
    fire("before_intent", name)
    try:
        call = await session.journal.aio.record_intent(
            run.run_id,
            agent_no=agent.number,
            seq=seq,
            kind=kind,
            name=name,
            args=args,
            policy=policy,
        )
    except ReplayDivergence as exc:  # the engine already held the run
        verdict = judge(None, Evidence(divergence=exc.to_dict()))
        raise DurableHold(str(verdict.reason), verdict.hold_detail()) from None
    except CorruptRecord as exc:  # a damaged result is never reused; the engine held the run
        verdict = judge(None, Evidence(record_damage=exc.to_dict()))
        raise DurableHold(str(verdict.reason), verdict.hold_detail()) from None
    fire("after_intent", name)
    run.note_call(agent.number, name)
    return call, seq


def evidence(session: DurableSession, call: Call, **found: Any) -> Evidence:
    """What the loop knows of a call the journal returned: whether it was open before
    the run was resumed, and what recovery allowed it."""
    run = session.current_run()
    known = call.id in run.known_calls
    return Evidence(known=known, permit=run.permits.get(call.id, ""), **found)


async def _hold(session: DurableSession, verdict: Verdict, call: Call) -> NoReturn:
    await session.hold(str(verdict.reason), verdict.hold_detail(position(call)))


async def _failed(session: DurableSession, call: Call, exc: BaseException) -> None:
    """Close a call whose effect raised something else than the provider's error."""
    kind_of = "repairable" if isinstance(exc, RepairableException) else "error"
    text = results.storable_text(exc)
    error = {"error": kind_of, "type": type(exc).__name__, "message": text}
    await session.journal.aio.commit_result(call.id, error, failed=True)


# seam 1: model calls ---------------------------------------------------------------------
def _mark_model_items(
    session: DurableSession, agent: Agent, start: int, call_id: str, restored: str
) -> None:
    """Name the call on the agent items its reply made (``journal``: a reused reply)."""
    for item in session.context.log.items[start:]:
        if item.type == "agent" and item.agentno == agent.number and not item.call_id:
            item.mark(call_id=call_id, restored=restored)


def _model_args(
    session: DurableSession, agent: Agent, messages: list[dict[str, str]], kind: str
) -> dict[str, Any]:
    config = agent.config.model_config(kind)
    masked = session.journal.masker.mask(messages)
    return {
        "provider": config.provider,
        "model": config.name,
        "kind": kind,
        "messages_digest": digest(masked),
    }


async def _replay_reply(
    reply: ModelResult, on_reasoning: StreamCallback | None, on_response: StreamCallback | None
) -> ModelResult:
    """Feed a committed reply once through the stream callbacks (log and history)."""
    if on_reasoning is not None and reply.reasoning:
        await on_reasoning(reply.reasoning, reply.reasoning)
    if on_response is not None and reply.response:
        await on_response(reply.response, reply.response)
    return reply


async def _model_verdict(session: DurableSession, call: Call, kind: str) -> Verdict:
    """The verdict on a model call; a failure is retried only through a retry grant (used
    here, counted down by the journal, which supersedes the call: attempt + 1)."""
    found = evidence(session, call, utility=kind == "utility")
    verdict = judge(call, found)
    if verdict.action is Action.ASK_GRANT:
        run_id = session.current_run().run_id
        granted = await session.journal.aio.consume_retry(run_id, call_id=call.id)
        verdict = judge(call, replace(found, grant=granted))
    return verdict


def _recorded_failure(call: Call) -> Exception:
    """A committed model failure, raised again as the first time."""
    result = call.result if isinstance(call.result, dict) else {}
    if result.get("error") == "repairable":  # the loop went on after it: so again
        return RepairableException(str(result.get("message") or "model call failed"))
    # a utility call: the loop copes (compression truncates)
    return ModelError(str(result.get("message") or "model error"), result.get("status"))


async def model_call(
    session: DurableSession,
    agent: Agent,
    messages: list[dict[str, str]],
    kind: str,
    effect: Callable[[], Awaitable[ModelResult]],
    *,
    on_reasoning: StreamCallback | None = None,
    on_response: StreamCallback | None = None,
) -> ModelResult:
    """Journal one model call; reuse a committed reply instead of calling the model."""
    run = session.current_run()
    journal = session.journal
    args = _model_args(session, agent, messages, kind)
    while True:
        call, seq = await _intent(
            session, agent, CallKind.MODEL, MODEL_CALL_NAME, args, Policy.HOLD
        )
        verdict = await _model_verdict(session, call, kind)
        if verdict.action is Action.HOLD:
            await _hold(session, verdict, call)
        if verdict.action is Action.REUSE:
            result = call.result
            reply = ModelResult(result["response"], str(result.get("reasoning") or ""))
            start = len(session.context.log.items)
            reply = await _replay_reply(reply, on_reasoning, on_response)
            _mark_model_items(session, agent, start, call.id, "journal")
            return reply
        if verdict.action is Action.FAIL:
            raise _recorded_failure(call)
        if verdict.action is Action.RETRY:
            run.seq[agent.number] = seq  # same position, attempt + 1
        if verdict.action is not Action.RUN:
            continue  # next (confirmed, no reply), abandoned or retried: ask again
        await session.before_effect(call)
        start = len(session.context.log.items)
        try:
            reply = await effect()
        except ModelError as exc:
            error = {"error": "model_error", "status": exc.status, "message": str(exc)[:2000]}
            await journal.aio.commit_result(call.id, error, failed=True)
            failed = replace(call, state=CallState.FAILED, result=error)
            verdict = await _model_verdict(session, failed, kind)
            if verdict.action is Action.FAIL:
                raise
            if verdict.action is Action.HOLD:
                await _hold(session, verdict, call)
            run.seq[agent.number] = seq  # retried: same position, attempt + 1
            continue
        except InterventionException:
            await journal.aio.commit_result(call.id, {"interrupted": True})
            raise
        except Exception as exc:  # not the provider (e.g. a stream extension): close the call
            await _failed(session, call, exc)
            raise
        fire("after_effect", MODEL_CALL_NAME)
        _mark_model_items(session, agent, start, call.id, "")
        committed = {"response": reply.response, "reasoning": reply.reasoning}
        await journal.aio.commit_result(call.id, committed)
        fire("after_result", MODEL_CALL_NAME)
        return reply


# seam 2: tool calls ----------------------------------------------------------------------
def _receipt_text(output: Any) -> str:
    if isinstance(output, dict):
        text = output.get("message", output.get("output"))
        return text if isinstance(text, str) else canonical_json(output)
    return str(output)


def recorded_response(agent: Agent, result: Any) -> Response:
    """The Response a committed tool result stands for (the tool is not run again)."""
    if not isinstance(result, dict):
        return Response(str(result), False)
    if result.get("confirmed_completed"):
        note = str(result.get("note") or "")
        return Response(agent.read_prompt("fw.call_confirmed.md", note=note), False)
    if "receipt" in result:
        return Response(_receipt_text(result["receipt"]), False)
    if isinstance(result.get("message"), str):
        additional = result.get("additional")
        extra = additional if isinstance(additional, dict) else None
        return Response(result["message"], bool(result.get("break_loop")), extra)
    return Response(str(result), False)


def _mark_tool_item(run: DurableRun, tool: Tool, call: Call, child: bool) -> None:
    """Name the call on the tool's log item and say whether the journal supplied its
    outcome (``journal``) or cannot vouch for it (``uncertain``: the run is held)."""
    restored = ""
    if call.state in (CallState.COMPLETED, CallState.FAILED, CallState.ABANDONED):
        restored = "journal"
    elif call.state == CallState.OPEN and call.id in run.known_calls and not child:
        restored = "" if run.permits.get(call.id) in PERMITTED else "uncertain"
    tool.log_marks = {"call_id": call.id, "restored": restored}
    if isinstance(tool.log, LogItem):
        tool.log.mark(**tool.log_marks)


async def _reuse(session: DurableSession, agent: Agent, tool: Tool, call: Call) -> Response | None:
    """What the journal already holds at this position, or None when the tool must run."""
    verdict = judge(call, evidence(session, call))
    if verdict.action is Action.HOLD:
        await _hold(session, verdict, call)
    if verdict.action is Action.REUSE:
        return recorded_response(agent, call.result)
    if verdict.action is Action.FAIL:
        error = call.result if isinstance(call.result, dict) else {}
        message = str(error.get("message") or "the tool failed")
        if error.get("error") in ("repairable", results.NOT_STORABLE):
            raise RepairableException(message)
        raise RecordedToolError(message)
    if verdict.action is Action.ABANDONED:
        return Response(agent.read_prompt("fw.call_abandoned.md", tool_name=tool.name), False)
    return None  # run, replay, or a child workflow that resumes


async def _forget_receipt(session: DurableSession, call: Call) -> None:
    """The journal holds the call's result now: its shell receipt (with the command's
    output, which may show a secret in clear) is no longer evidence of anything."""
    if call.policy == Policy.SHELL and session.receipts is not None:
        await asyncio.to_thread(session.receipts.discard, call.id)


async def tool_call(
    session: DurableSession, agent: Agent, tool: Tool, effect: Callable[[], Awaitable[Response]]
) -> Response:
    """Journal one tool execution; reuse a committed result instead of running the tool."""
    journal = session.journal
    kind = CallKind.SUBORDINATE if tool.name == SUBORDINATE_TOOL else CallKind.TOOL
    policy = await session.chats.policy.of(tool)
    args = {"method": tool.method, "args": tool.args}
    call, _seq = await _intent(session, agent, kind, tool.name, args, policy)
    child = kind == CallKind.SUBORDINATE and policy == Policy.CHILD
    _mark_tool_item(session.current_run(), tool, call, child)
    reused = await _reuse(session, agent, tool, call)
    if reused is not None:
        return reused
    tool.call_identity = (call.id, digest(call.args))  # receipts name the call by it
    await session.before_effect(call)
    try:
        response = await effect()
    except InterventionException:
        await journal.aio.commit_result(call.id, {"interrupted": True, "progress": tool.progress})
        await _forget_receipt(session, call)
        raise
    except CorruptRecord as exc:  # the tool met a damaged record (the plan): nothing was used
        verdict = judge(call, Evidence(record_damage=exc.to_dict()))
        await _hold(session, verdict, call)
    except Exception as exc:
        await _failed(session, call, exc)
        await _forget_receipt(session, call)
        raise
    fire("after_effect", tool.name)
    if call.state == CallState.COMPLETED:  # a child workflow ran again: its answer must match
        result = results.tool_result(response)
        differs = digest(journal.masker.mask(result)) != call.result_digest
        verdict = judge(call, evidence(session, call, child_answer_differs=differs))
        if verdict.action is Action.HOLD:
            await _hold(session, verdict, call)
        return response
    durable = await results.commit(journal, agent, tool, call, response)
    await fire_after_deferred(session, "after_result", tool.name)
    if durable:
        await _forget_receipt(session, call)
    return response


# iteration end -----------------------------------------------------------------------------
async def iteration_end(session: DurableSession, agent: Agent, *, final: bool) -> None:
    """Checkpoint after each loop iteration. Agent 0's iterations also move the resume
    base, except the last one (``final``): a resume replays that one instead of looping on."""
    run: DurableRun = session.current_run()
    context = session.context
    if agent.number == 0 and run.start_agent == 0 and not final:
        checkpoint.set_resume_base(context, run, agent, phase="iteration")
    await checkpoint.write(context, run, session.journal)
    for name in dict.fromkeys(run.iteration_calls.pop(agent.number, [])):
        await fire_after_deferred(session, "after_checkpoint", name)
