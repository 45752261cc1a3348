"""The glue between the agent loop and the journal: admission, the two seams, run end.

A chat with ``context.journal`` set journals every run (docs/durability-loop.md):
admission gives each message an input id and digest; every model call and tool call
takes the next sequence number of its agent in the run, commits its intent before the
effect and its result after; every loop iteration ends with a checkpoint. A call whose
result is already in the journal is reused, never run again. What cannot be proven is
held for a person (``DurableHold``). Without a journal none of this runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from durability import failpoints, paths, replay
from durability.canonical import canonical_json, digest
from durability.errors import (
    CorruptRecord,
    DurabilityError,
    InvalidTransition,
    OpenIntents,
    ReplayDivergence,
    RunNotActive,
    StaleVersion,
)
from python.durable import results as durable_result
from python.helpers import files
from python.helpers.tool import Response

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext, UserMessage
    from durability import Journal
    from durability.records import Call, Run

logger = logging.getLogger("a0.durable")

MODEL_CALL_NAME = "model"
CHILD_POLICY = "child"


class DurableHold(BaseException):
    """The run was held for a person: unwind the whole chain (not an agent error)."""

    def __init__(self, reason: str, detail: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


@dataclass
class DurableRun:
    """In-memory state of the journaled run a chat is working on."""

    run_id: str
    input_id: str
    start_agent: int = 0
    seq: dict[int, int] = field(default_factory=dict)  # next sequence number per agent
    known_calls: set[str] = field(default_factory=set)  # call ids journaled before a resume
    permits: dict[str, str] = field(default_factory=dict)  # call id -> replay | run
    resume_base: tuple[dict, dict] | None = None  # (state, histories) to resume from
    iteration_calls: dict[int, list[str]] = field(default_factory=dict)  # names, per agent

    def note_call(self, agent_no: int, name: str) -> None:
        self.iteration_calls.setdefault(agent_no, []).append(name)

    def take_seq(self, agent_no: int) -> int:
        seq = self.seq.get(agent_no, 0)
        self.seq[agent_no] = seq + 1
        return seq


_shutting_down = False


def begin_shutdown() -> None:
    """The server is stopping: cancelled runs stay active for recovery instead of stopping."""
    global _shutting_down
    _shutting_down = True


def end_shutdown() -> None:
    global _shutting_down
    _shutting_down = False


def fire(boundary: str, name: str) -> None:
    failpoints.failpoint(boundary, name, paths.state_dir(files.usr_dir()))


# running a run ------------------------------------------------------------------------
async def run_admitted(context: AgentContext, agent: Agent, run: Run, msg: UserMessage) -> str:
    """Run a freshly admitted input: history, base checkpoint, then the chain."""
    from python.durable import checkpoint as durable_checkpoint

    context.durable_run = DurableRun(run.id, run.input_id, start_agent=agent.number)
    context.model_calls = context.tool_calls = 0
    agent.hist_add_user_message(msg)
    durable_checkpoint.set_resume_base(context, agent, phase="start")
    await durable_checkpoint.write(context)
    return await drive(context, agent, resume=False)


async def drive(context: AgentContext, agent: Agent, *, resume: bool) -> str:
    """Run the chain of a journaled run to its end: completed, failed, held or stopped."""
    try:
        return await _drive(context, agent, resume=resume)
    finally:
        context.durable_run = None  # the run is over (or held): no journaling outside it


async def _drive(context: AgentContext, agent: Agent, *, resume: bool) -> str:
    from python.helpers.errors import HandledException

    state: DurableRun = context.durable_run
    journal = context.journal
    try:
        response = await context._chain(agent, None, resume=resume)
    except DurableHold as hold:
        context.log.log(
            type="warning",
            heading="Run held for a decision",
            content=held_text(hold.reason, hold.detail),
            kvps={"run_id": state.run_id, "reason": hold.reason},
        )
        return ""
    except asyncio.CancelledError:
        if not _shutting_down:  # Stop / reset / nudge: the run ends here
            await asyncio.shield(asyncio.to_thread(_stop_quietly, journal, state.run_id))
        raise  # on shutdown the run stays active: recovery continues it at the next start
    except HandledException as e:
        await _finish(context, str(e), failed=True)
        return str(e)
    except failpoints.SimulatedCrash:
        raise
    except Exception as e:
        try:
            agent.log_error(e)
        except HandledException as handled:
            await _finish(context, str(handled), failed=True)
            return str(handled)
        return "Error"
    await _finish(context, response, failed=False)
    return response


async def _finish(context: AgentContext, response: str, *, failed: bool) -> None:
    state: DurableRun = context.durable_run
    journal = context.journal
    open_calls = await journal.aio.open_intents(state.run_id)
    if open_calls:  # never end a run whose call has no journaled outcome: hold it instead
        detail = {**_position(open_calls[-1]), "why": "run_ended_with_open_call"}
        with contextlib.suppress(InvalidTransition):
            await journal.aio.mark_needs_attention(state.run_id, "uncertain_call", detail)
        context.log.log(
            type="warning",
            heading="Run held for a decision",
            content="The run ended with a call whose outcome is not journaled; it waits for "
            "a person's decision (reason: uncertain_call).",
            kvps={"run_id": state.run_id, "reason": "uncertain_call"},
        )
        return
    await journal.aio.append_event(
        context.id, "run_result", {"response": response, "failed": failed}, run_id=state.run_id
    )
    try:
        await journal.aio.set_run_status(state.run_id, "failed" if failed else "completed")
    except (OpenIntents, InvalidTransition, RunNotActive) as exc:
        logger.warning("run %s could not be closed: %s", state.run_id, exc.code)


def held_text(reason: str | None, detail: Any = None) -> str:
    """The chat's warning for a held run; a damaged record is named."""
    text = f"This run waits for a person's decision (reason: {reason})."
    if reason == "corrupt_record" and isinstance(detail, dict):
        from durability.integrity import Damage

        ids = {k: v for k, v in detail.items() if k not in ("record", "reason", "code")}
        ids.pop("message", None)
        damage = Damage(str(detail.get("record")), str(detail.get("reason")), ids)
        text += f" A journaled record is damaged and was not used: {damage.describe()}."
    return text


def _stop_quietly(journal: Journal, run_id: str) -> None:
    """The chat was stopped (Stop, reset, nudge): end the run, abandoning open calls.
    A journal write of the cancelled step may still land meanwhile: retry on its version."""
    for _ in range(10):
        try:
            run = journal.get_run(run_id)
            if run.is_open:
                journal.decide(run_id, "stop", version=run.version, actor="user:stop")
            return
        except StaleVersion:
            continue
        except DurabilityError as exc:
            logger.warning("run %s could not be stopped: %s", run_id, exc.code)
            return
    logger.warning("run %s could not be stopped: its version kept changing", run_id)


async def hold(context: AgentContext, reason: str, detail: Any = None) -> NoReturn:
    """Hold the run for a person and unwind the chain."""
    state: DurableRun = context.durable_run
    with contextlib.suppress(InvalidTransition):
        await context.journal.aio.mark_needs_attention(state.run_id, reason, detail)
    raise DurableHold(reason, detail)


async def _intent(agent: Agent, seq: int, kind: str, name: str, args: Any, policy: str) -> Call:
    context = agent.context
    state: DurableRun = context.durable_run
    try:
        return await context.journal.aio.record_intent(
            state.run_id, agent_no=agent.number, seq=seq, kind=kind, name=name, args=args,
            policy=policy,
        )  # fmt: skip
    except ReplayDivergence as exc:  # the engine already held the run
        raise DurableHold("replay_divergence", exc.to_dict()) from None
    except CorruptRecord as exc:  # a damaged result is never reused; the engine held the run
        raise DurableHold("corrupt_record", exc.to_dict()) from None


def _position(call: Call) -> dict[str, Any]:
    return {"call_id": call.id, "agent_no": call.agent_no, "seq": call.seq,
            "kind": call.kind, "name": call.name}  # fmt: skip


# seam 1: model calls ---------------------------------------------------------------------
def _model_args(agent: Agent, messages: list[dict], kind: str) -> dict[str, Any]:
    config = agent.config.model_config(kind)
    masked = agent.context.journal.masker.mask(messages)
    return {"provider": config.provider, "model": config.name, "kind": kind,
            "messages_digest": digest(masked)}  # fmt: skip


async def model_call(
    agent: Agent, messages: list[dict], kind: str, effect: Any, *,
    on_reasoning: Any = None, on_response: Any = None,
) -> Any:  # fmt: skip
    """Journal one model call; reuse a committed reply instead of calling the model."""
    from python.helpers.errors import InterventionException, RepairableException
    from python.helpers.models import ModelError, ModelResult

    context = agent.context
    state: DurableRun = context.durable_run
    journal = context.journal
    args = _model_args(agent, messages, kind)
    while True:
        seq = state.take_seq(agent.number)
        fire("before_intent", MODEL_CALL_NAME)
        call = await _intent(agent, seq, "model", MODEL_CALL_NAME, args, "hold")
        fire("after_intent", MODEL_CALL_NAME)
        state.note_call(agent.number, MODEL_CALL_NAME)
        if call.state == "completed":
            result = call.result if isinstance(call.result, dict) else {}
            if result.get("interrupted"):
                await hold(context, "replay_divergence", {**_position(call), "why": "interrupted"})
            if isinstance(result.get("response"), str):
                reply = ModelResult(result["response"], str(result.get("reasoning") or ""))
                if on_reasoning is not None and reply.reasoning:
                    await on_reasoning(reply.reasoning, reply.reasoning)
                if on_response is not None and reply.response:
                    await on_response(reply.response, reply.response)
                return reply
            continue  # confirmed by a person: no reply to reuse, ask at the next position
        if call.state == "abandoned":
            continue  # outcome unknown and left behind: ask again at the next position
        if call.state == "failed":
            error = call.result if isinstance(call.result, dict) else {}
            if error.get("error") == "repairable":  # the loop went on after it: so again
                raise RepairableException(str(error.get("message") or "model call failed"))
            if kind == "utility":  # the loop copes (compression truncates): same as the first time
                raise ModelError(str(error.get("message") or "model error"), error.get("status"))
            if await journal.aio.consume_retry(state.run_id, call_id=call.id):
                state.seq[agent.number] = seq  # same position, attempt + 1
                continue
            await hold(context, "model_failed", {**_position(call), "error": call.result})
        if call.id in state.known_calls:  # open before the crash: the outcome is unknown
            await hold(context, "uncertain_call", {**_position(call), "why": "model_call"})
        try:
            reply = await effect()
        except ModelError as exc:
            error = {"error": "model_error", "status": exc.status, "message": str(exc)[:2000]}
            await journal.aio.commit_result(call.id, error, failed=True)
            if kind == "utility":
                raise
            if await journal.aio.consume_retry(state.run_id, call_id=call.id):
                state.seq[agent.number] = seq
                continue
            await hold(context, "model_failed", {**_position(call), "error": error})
        except InterventionException:
            await journal.aio.commit_result(call.id, {"interrupted": True})
            raise
        except Exception as exc:  # not the provider (e.g. a stream extension): close the call
            kind_of = "repairable" if isinstance(exc, RepairableException) else "error"
            text = durable_result.storable_text(exc)
            error = {"error": kind_of, "type": type(exc).__name__, "message": text}
            await journal.aio.commit_result(call.id, error, failed=True)
            raise
        fire("after_effect", MODEL_CALL_NAME)
        await journal.aio.commit_result(
            call.id, {"response": reply.response, "reasoning": reply.reasoning}
        )
        fire("after_result", MODEL_CALL_NAME)
        return reply


# seam 2: tool calls ----------------------------------------------------------------------
def _tool_source(tool: Any) -> Path | None:
    try:
        return Path(inspect.getfile(type(tool)))
    except (TypeError, OSError):
        return None


def tool_policy(tool: Any) -> str:
    """Replay policy from the engine's table, never from the model's output."""
    source = _tool_source(tool)
    safe = source is not None and replay.is_safe(tool.name, source)
    if tool.name == "call_subordinate":
        return CHILD_POLICY if safe else "hold"
    if safe:
        return "safe_replay"
    if tool.name == "code_execution_tool":
        return "adapter:shell"
    return "hold"


def _recorded_response(agent: Agent, result: Any) -> Response:
    if isinstance(result, dict) and result.get("confirmed_completed"):
        note = str(result.get("note") or "")
        return Response(agent.read_prompt("fw.call_confirmed.md", note=note), False)
    if isinstance(result, dict) and "receipt" in result:
        output = result["receipt"]
        if isinstance(output, dict):
            text = output.get("message", output.get("output"))
            output = text if isinstance(text, str) else canonical_json(output)
        return Response(str(output), False)
    if isinstance(result, dict) and isinstance(result.get("message"), str):
        additional = result.get("additional")
        return Response(result["message"], bool(result.get("break_loop")),
                        additional if isinstance(additional, dict) else None)  # fmt: skip
    return Response(str(result), False)


async def tool_call(agent: Agent, tool: Any, effect: Any) -> Response:
    """Journal one tool execution; reuse a committed result instead of running the tool."""
    from python.helpers.errors import InterventionException, RepairableException

    context = agent.context
    state: DurableRun = context.durable_run
    journal = context.journal
    kind = "subordinate" if tool.name == "call_subordinate" else "tool"
    policy = tool_policy(tool)
    args = {"method": tool.method, "args": tool.args}
    seq = state.take_seq(agent.number)
    fire("before_intent", tool.name)
    call = await _intent(agent, seq, kind, tool.name, args, policy)
    fire("after_intent", tool.name)
    state.note_call(agent.number, tool.name)
    child = kind == "subordinate" and policy == CHILD_POLICY
    if call.state == "completed" and not child:
        if isinstance(call.result, dict) and call.result.get("interrupted"):
            await hold(context, "replay_divergence", {**_position(call), "why": "interrupted"})
        return _recorded_response(agent, call.result)
    if call.state == "failed":
        error = call.result if isinstance(call.result, dict) else {}
        message = str(error.get("message") or "the tool failed")
        if error.get("error") in ("repairable", durable_result.NOT_STORABLE):
            raise RepairableException(message)
        raise RecordedToolError(message)
    if call.state == "abandoned":
        return Response(agent.read_prompt("fw.call_abandoned.md", tool_name=tool.name), False)
    uncertain = call.state == "open" and call.id in state.known_calls and not child
    if uncertain and state.permits.get(call.id) not in ("replay", "run"):
        await hold(context, "uncertain_call", {**_position(call), "why": "not_proven"})
    tool.call_identity = (call.id, digest(call.args))  # receipts name the call by it
    try:
        response = await effect()
    except InterventionException:
        await journal.aio.commit_result(call.id, {"interrupted": True, "progress": tool.progress})
        raise
    except CorruptRecord as exc:  # the tool met a damaged record (the plan): nothing was used
        await hold(context, "corrupt_record", exc.to_dict())
    except Exception as exc:
        kind_of = "repairable" if isinstance(exc, RepairableException) else "error"
        text = durable_result.storable_text(exc)
        error = {"error": kind_of, "type": type(exc).__name__, "message": text}
        await journal.aio.commit_result(call.id, error, failed=True)
        raise
    fire("after_effect", tool.name)
    if call.state == "completed":  # a child workflow ran again: its answer must match
        result = durable_result.tool_result(response)
        if digest(journal.masker.mask(result)) != call.result_digest:
            await hold(context, "replay_divergence", {**_position(call), "why": "child_result"})
        return response
    await durable_result.commit(journal, agent, tool, call, response)
    fire("after_result", tool.name)
    return response


class RecordedToolError(Exception):
    """A tool failure replayed from the journal (the tool is not run again)."""

    code = "tool_failed"


# iteration end -----------------------------------------------------------------------------
async def iteration_end(agent: Agent, *, final: bool = False) -> None:
    """Checkpoint after each loop iteration. Agent 0's iterations also move the resume
    base, except the last one (``final``): a resume replays that one instead of looping on."""
    from python.durable import checkpoint as durable_checkpoint

    context = agent.context
    state: DurableRun = context.durable_run
    if agent.number == 0 and state.start_agent == 0 and not final:
        durable_checkpoint.set_resume_base(context, agent, phase="iteration")
    await durable_checkpoint.write(context)
    for name in dict.fromkeys(state.iteration_calls.pop(agent.number, [])):
        fire("after_checkpoint", name)


__all__ = [
    "DurableHold",
    "DurableRun",
    "drive",
    "hold",
    "iteration_end",
    "model_call",
    "run_admitted",
    "tool_call",
    "tool_policy",
]
