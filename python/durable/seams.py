"""The two seams: every model call and every tool call of a run, journaled.

``CallSeams`` is the part of the run scope (python/durable/scope.py, ``RunScope``) that the
loop's two one-call seams reach: ``Agent.call_model`` -> ``DurableSession.model_call`` ->
``RunScope.model_call``, ``Agent.execute_tool`` -> ``tool_call``; every iteration ends with
``iteration_end``.

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
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from durability import failpoints
from durability.adapters.evidence import forget_receipts
from durability.canonical import digest
from durability.errors import CorruptRecord, InvalidTransition, ReplayDivergence
from durability.status import CallKind, CallState, Permit, Policy
from durability.verdicts import Action, Evidence, Verdict, judge
from python.durable import adoption, checkpoint, grants, results
from python.durable.policy import SUBORDINATE_TOOL
from python.durable.recorded import (
    NOT_CONFIGURED,
    RecordedToolError,
    fingerprint_messages,
    fire,
    position,
    recorded_failure,
    recorded_response,
    replay_reply,
)
from python.durable.run import DurableHold, DurableRun
from python.helpers import includes, prompts
from python.helpers.errors import InterventionException, RepairableException
from python.helpers.log import LogItem
from python.helpers.models import ModelError, ModelNotConfigured, ModelResult
from python.helpers.shell import Timeouts
from python.helpers.tool import Response, Tool

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext
    from durability import Journal
    from durability.records import Call
    from python.durable.ports import Chats
    from python.helpers.chat_session import ModelRequest

MODEL_CALL_NAME = "model"
EVIDENCE_EVENT = "call_evidence"  # what an effect tool saw just before it acted
PERMITTED = (Permit.REPLAY, Permit.RUN)  # recovery permits that let an open call run again
WATCHED = Permit.WATCH  # its shell still runs: the loop waits for its receipt (adoption.py)


def _mark_tool_item(run: DurableRun, tool: Tool, call: Call, child: bool) -> None:
    """Name the call on the tool's log item and say whether the journal supplied its
    outcome (``journal``) or cannot vouch for it (``uncertain``: the run is held)."""
    restored = ""
    if call.state in (CallState.COMPLETED, CallState.FAILED, CallState.ABANDONED):
        restored = "journal"
    elif call.state == CallState.OPEN and call.id in run.known_calls and not child:
        permit = run.permits.get(call.id)
        restored = "" if permit in PERMITTED or permit == WATCHED else "uncertain"
    tool.log_marks = {"call_id": call.id, "restored": restored}
    if isinstance(tool.log, LogItem):
        tool.log.mark(**tool.log_marks)


class SeamHost(Protocol):
    """What the seams use of the chat's session (``DurableSession``)."""

    context: AgentContext
    chats: Chats


class CallSeams:
    """The seams of one run: its state (``state``), its chat's session and journal. The run
    scope (python/durable/scope.py) is one; the loop reaches it through its session."""

    def __init__(self, session: SeamHost, state: DurableRun) -> None:
        self.session = session
        self.state = state
        self.context, self.chats = session.context, session.chats  # the session keeps both
        self.journal: Journal = session.chats.journal

    async def hold(self, reason: str, detail: Any = None) -> NoReturn:
        """Hold the run for a person and unwind the chain."""
        with contextlib.suppress(InvalidTransition):
            await self.journal.aio.mark_needs_attention(self.state.run_id, reason, detail)
        raise DurableHold(reason, detail)

    async def fire_after_deferred(self, boundary: str, name: str) -> None:
        """``fire`` after a write the journal may have deferred: an armed point first waits
        for it to be on disk, so ``after_result`` and ``after_checkpoint`` keep their meaning."""
        if failpoints.armed(boundary, name):
            await self.journal.aio.flush()
        fire(boundary, name)

    async def _intent(
        self, agent: Agent, kind: str, name: str, args: Any, policy: str
    ) -> tuple[Call, int]:
        """Commit the intent at the agent's next position; (the call, its sequence number)."""
        run = self.state
        seq = run.take_seq(agent.number)
        fire("before_intent", name)
        try:
            call = await self.journal.aio.record_intent(
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

    def evidence(self, call: Call, **found: Any) -> Evidence:
        """What the loop knows of a call the journal returned: whether it was open before
        the run was resumed, and what recovery allowed it."""
        run = self.state
        known = call.id in run.known_calls
        return Evidence(known=known, permit=run.permits.get(call.id, ""), **found)

    async def _hold(self, verdict: Verdict, call: Call) -> NoReturn:
        await self.hold(str(verdict.reason), verdict.hold_detail(position(call)))

    async def _failed(self, call: Call, exc: BaseException) -> None:
        """Close a call whose effect raised something else than the provider's error."""
        kind_of = "repairable" if isinstance(exc, RepairableException) else "error"
        text = results.storable_text(exc)
        error = {"error": kind_of, "type": type(exc).__name__, "message": text}
        await self.journal.aio.commit_result(call.id, error, failed=True)

    # seam 1: model calls ---------------------------------------------------------------------
    def _mark_model_items(self, agent: Agent, start: int, call_id: str, restored: str) -> None:
        """Name the call on the agent items its reply made (``journal``: a reused reply)."""
        for item in self.context.log.items[start:]:
            if item.type == "agent" and item.agentno == agent.number and not item.call_id:
                item.mark(call_id=call_id, restored=restored)

    def _model_args(
        self, agent: Agent, messages: list[dict[str, str]], kind: str
    ) -> dict[str, Any]:
        config = agent.config.model_config(kind)
        masked = self.journal.masker.mask(fingerprint_messages(messages))
        # neither the clock nor where this worker keeps the chat's files is a divergence
        volatile = [
            *(agent.loop_data.params_temporary.get(prompts.VOLATILE_KEY) or []),
            str(includes.chat_folder(agent.context.id)),
        ]
        masked = prompts.stable_view(masked, volatile)
        return {
            "provider": config.provider,
            "model": config.name,
            "kind": kind,
            "messages_digest": digest(masked),
        }

    async def _model_verdict(self, call: Call, kind: str) -> Verdict:
        """The verdict on a model call; a failure is retried only through a retry grant (used
        here, counted down by the journal, which supersedes the call: attempt + 1)."""
        found = self.evidence(call, utility=kind == "utility")
        verdict = judge(call, found)
        if verdict.action is Action.ASK_GRANT:  # the run's grants, then a standing one
            granted = await grants.consume(self.journal, self.context, self.state.run_id, call)
            verdict = judge(call, replace(found, grant=granted))
        return verdict

    async def model_call(self, agent: Agent, request: ModelRequest) -> ModelResult:
        """Journal one model call; reuse a committed reply instead of calling the model.
        ``preflight`` runs before a fresh position's intent is recorded: a model that cannot
        be called as configured (``ModelNotConfigured``) fails the turn, nothing is held."""
        run, journal, kind = self.state, self.journal, request.kind
        args = self._model_args(agent, request.messages, kind)
        if request.preflight is not None and run.fresh_position(agent.number):
            await request.preflight()
        while True:
            call, seq = await self._intent(
                agent, CallKind.MODEL, MODEL_CALL_NAME, args, Policy.HOLD
            )
            verdict = await self._model_verdict(call, kind)
            if verdict.action is Action.HOLD:
                await self._hold(verdict, call)
            if verdict.action is Action.REUSE:
                result = call.result
                reply = ModelResult(result["response"], str(result.get("reasoning") or ""))
                start = len(self.context.log.items)
                reply = await replay_reply(reply, request.on_reasoning, request.on_response)
                self._mark_model_items(agent, start, call.id, "journal")
                return reply
            if verdict.action is Action.FAIL:
                raise recorded_failure(call)
            if verdict.action is Action.RETRY:
                run.seq[agent.number] = seq  # same position, attempt + 1
            if verdict.action is not Action.RUN:
                continue  # next (confirmed, no reply), abandoned or retried: ask again
            await self.chats.ownership.gate(call)
            start = len(self.context.log.items)
            try:
                reply = await request.effect()
            except ModelNotConfigured as exc:  # the connection was never made: nothing left
                error = {"error": NOT_CONFIGURED, "reason": exc.reason, "sent": False}
                error["message"] = str(exc)[:2000]
                await journal.aio.commit_result(call.id, error, failed=True)
                raise
            except ModelError as exc:
                error = {"error": "model_error", "status": exc.status, "message": str(exc)[:2000]}
                await journal.aio.commit_result(call.id, error, failed=True)
                failed = replace(call, state=CallState.FAILED, result=error)
                verdict = await self._model_verdict(failed, kind)
                if verdict.action is Action.FAIL:
                    raise
                if verdict.action is Action.HOLD:
                    await self._hold(verdict, call)
                run.seq[agent.number] = seq  # retried: same position, attempt + 1
                continue
            except InterventionException:
                await journal.aio.commit_result(call.id, {"interrupted": True})
                raise
            except Exception as exc:  # not the provider (e.g. a stream extension): close the call
                await self._failed(call, exc)
                raise
            fire("after_effect", MODEL_CALL_NAME)
            self._mark_model_items(agent, start, call.id, "")
            committed = {"response": reply.response, "reasoning": reply.reasoning}
            await journal.aio.commit_result(call.id, committed)
            fire("after_result", MODEL_CALL_NAME)
            return reply

    # seam 2: tool calls ----------------------------------------------------------------------
    async def _reuse(self, agent: Agent, tool: Tool, call: Call) -> Response | None:
        """What the journal already holds at this position, or None when the tool must run."""
        verdict = judge(call, self.evidence(call))
        if verdict.action is Action.HOLD:
            await self._hold(verdict, call)
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

    async def _keep_evidence(self, tool: Tool, call: Call) -> None:
        """What an effect tool shows of the world just before it acts (the browser's page
        and a screenshot), journaled next to the call: a hold shows it as evidence."""
        found = await tool.evidence()
        if found is None:
            return
        fields, image = found
        payload = {**fields, "call_id": call.id}
        if image:
            payload["screenshot"] = await self.journal.aio.put_blob(image)
        await self.journal.aio.append_event(
            self.context.id, EVIDENCE_EVENT, payload, run_id=self.state.run_id
        )

    async def _forget_receipt(self, call: Call) -> None:
        """The journal holds the call's result now: its shell receipt (with the command's
        output, which may show a secret in clear) is no longer evidence of anything."""
        receipts = self.chats.receipts
        if receipts is not None and call.policy in (Policy.SHELL, Policy.PTY):
            await asyncio.to_thread(forget_receipts, receipts, self.context.id, call)

    async def tool_call(
        self, agent: Agent, tool: Tool, effect: Callable[[], Awaitable[Response]]
    ) -> Response:
        """Journal one tool execution; reuse a committed result instead of running the tool."""
        journal = self.journal
        kind = CallKind.SUBORDINATE if tool.name == SUBORDINATE_TOOL else CallKind.TOOL
        policy = await self.chats.policy.of(tool)
        args = {"method": tool.method, "args": tool.args}
        call, _seq = await self._intent(agent, kind, tool.name, args, policy)
        child = policy == Policy.CHILD  # call_subordinate, browser_agent
        _mark_tool_item(self.state, tool, call, child)
        reused = await self._reuse(agent, tool, call)
        if reused is not None:
            results.skip_nested(self.state.seq, agent.number, call)
            return reused
        if judge(call, self.evidence(call)).action is Action.WATCH:  # it outlived a restart
            limit = Timeouts.from_settings(agent.config.settings).total
            found = await adoption.watch(self.chats.evidence, call, limit, tool)
            if isinstance(found, Verdict):
                await self._hold(found, call)
            await journal.aio.commit_result(call.id, found)
            await self._forget_receipt(call)
            return recorded_response(agent, found)
        tool.call_identity = (call.id, digest(call.args))  # receipts name the call by it
        await self.chats.ownership.gate(call)
        try:
            await self._keep_evidence(tool, call)
            response = await effect()
        except InterventionException:
            await journal.aio.commit_result(
                call.id, {"interrupted": True, "progress": tool.progress}
            )
            await self._forget_receipt(call)
            raise
        except CorruptRecord as exc:  # the tool met a damaged record (the plan): nothing was used
            verdict = judge(call, Evidence(record_damage=exc.to_dict()))
            await self._hold(verdict, call)
        except Exception as exc:
            await self._failed(call, exc)
            await self._forget_receipt(call)
            raise
        fire("after_effect", tool.name)
        if call.state == CallState.COMPLETED:  # a child workflow ran again: its answer must match
            result = results.tool_result(response)
            differs = digest(journal.masker.mask(result)) != call.result_digest
            verdict = judge(call, self.evidence(call, child_answer_differs=differs))
            if verdict.action is Action.HOLD:
                await self._hold(verdict, call)
            return response
        if call.policy == Policy.JOURNAL_ATOMIC:  # its writes commit with its result
            end = self.state.seq.get(agent.number, 0)
            await results.commit_atomic(journal, agent, tool, call, response, end)
            durable = True
        else:
            durable = await results.commit(journal, agent, tool, call, response)
        await self.fire_after_deferred("after_result", tool.name)
        if tool.shares_state:  # its state moves with the run (python/durable/takeover.py)
            await self.chats.ownership.after_iteration(self.context, self.state.run_id)
        if durable:
            await self._forget_receipt(call)
        return response

    # iteration end -----------------------------------------------------------------------------
    async def iteration_end(self, agent: Agent, *, final: bool) -> None:
        """Checkpoint after each loop iteration. Agent 0's iterations also move the resume
        base, except the last one (``final``): a resume replays that one instead of looping on."""
        run: DurableRun = self.state
        context = self.context
        if agent.number == 0 and run.start_agent == 0 and not final:
            checkpoint.set_resume_base(context, run, agent, phase="iteration")
        await checkpoint.write(context, run, self.journal)
        for name in dict.fromkeys(run.iteration_calls.pop(agent.number, [])):
            await self.fire_after_deferred("after_checkpoint", name)
