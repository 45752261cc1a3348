"""Calls: an intent journaled before the effect, its result committed after (optionally
with a checkpoint in the same transaction)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from durability import integrity
from durability._runs import bump, load_run, require_active
from durability.canonical import canonical_json, digest_text, fingerprint_from_json
from durability.errors import (
    CallNotFound,
    IntentMissing,
    InvalidArgument,
    ReplayDivergence,
    ResultConflict,
)
from durability.ids import new_id
from durability.journal._checkpoints import apply_cache, checkpoint_op
from durability.journal._operation import Builder, JournalBase, deferrable, operation
from durability.journal._plan import Plan, deferred, read, run_write
from durability.journal._validation import mask_only, require_int, require_text
from durability.records import CALL_KINDS, Call, CheckpointData
from durability.status import RESULT_STATES, CallKind, CallState, HoldReason, RunStatus
from durability.store.base import StoreTx, hot_path


class _Commit(Builder[bool]):
    """``commit_result`` and ``defer_result``: one builder, ``variant`` whether the result
    may ride on the run's next write."""

    def __call__(
        self,
        journal: JournalBase,
        call_id: str,
        result: Any,
        *,
        failed: bool = False,
        checkpoint: CheckpointData | None = None,
    ) -> Plan[Call]:
        plan = _commit_result(journal, call_id, result, failed, checkpoint)
        if not self.variant:
            return plan
        return deferred(plan, journal.deferrals.calls.pop(call_id, None))


class CallOps:
    """Calls: the intent before the effect, the result after, and reading them back."""

    @operation(prepare="args")
    def record_intent(
        journal: JournalBase,
        run_id: str,
        *,
        agent_no: int,
        seq: int,
        kind: str,
        name: str,
        args: Any,
        policy: str,
    ) -> Plan[Call]:
        """Journal a call before its effect. Returns the recorded call at this position when
        there is one (check ``call.state``: a committed result is reused, never re-run)."""
        require_text("run_id", run_id)
        require_int("agent_no", agent_no)
        require_int("seq", seq)
        if kind not in CALL_KINDS:
            raise InvalidArgument(f"kind must be one of {', '.join(CALL_KINDS)}", field="kind")
        require_text("name", name)
        require_text("policy", policy, max_length=64)
        masked_args = mask_only(journal.masker, args)
        args_json = canonical_json(masked_args)  # refuses what cannot be stored
        fp = fingerprint_from_json(kind, name, args_json, policy)
        now = journal.clock()
        fresh = Call(
            id=new_id(),
            run_id=run_id,
            agent_no=agent_no,
            seq=seq,
            attempt=1,
            kind=kind,
            name=name,
            args=masked_args,
            policy=policy,
            fingerprint=fp,
            state=CallState.OPEN,
            result=None,
            result_digest=None,
            created_at=now,
            closed_at=None,
        )

        @hot_path
        def op(tx: StoreTx) -> Call:
            if tx.calls.insert_if_free(fresh, args_json):  # the common case: a new position
                return fresh
            run = load_run(tx, run_id)
            require_active(run)
            latest = tx.calls.latest_at(run_id, agent_no, seq)
            retried_model = (  # a person or a grant asked this model call again, on purpose:
                latest is not None  # its messages may differ now (a new attempt, not a replay)
                and latest.state == CallState.SUPERSEDED
                and latest.kind == kind == CallKind.MODEL
            )
            if latest is not None and latest.fingerprint != fp and not retried_model:
                detail = {
                    "agent_no": agent_no,
                    "seq": seq,
                    "attempt": latest.attempt,
                    "recorded": latest.fingerprint,
                    "requested": fp,
                }
                bump(
                    tx,
                    run,
                    now,
                    status=RunStatus.NEEDS_ATTENTION,
                    reason=HoldReason.REPLAY_DIVERGENCE,
                    reason_detail=detail,
                )
                raise ReplayDivergence(
                    f"the call at agent {agent_no}, sequence {seq} differs from the journal",
                    run_id=run_id,
                    **detail,
                )
            if latest is not None and latest.state not in (
                CallState.SUPERSEDED,
                CallState.NOT_COMPLETED,
            ):
                damage = integrity.result_damage(latest)
                if damage is not None:  # a damaged result is never reused: hold the run
                    held = {
                        "status": RunStatus.NEEDS_ATTENTION,
                        "reason": HoldReason.CORRUPT_RECORD,
                    }
                    bump(tx, run, now, **held, reason_detail=damage.to_dict())
                    raise damage.error()
                # the arguments handed back are the caller's, proven equal by the fingerprint
                return dataclasses.replace(latest, args=masked_args)
            call = dataclasses.replace(fresh, attempt=(latest.attempt + 1) if latest else 1)
            tx.calls.insert(call)
            bump(tx, run, now)
            return call

        return run_write(op, run_id=run_id, after=journal.deferrals.note_intent)

    commit_result = operation(prepare="result")(
        _Commit(
            "commit_result",
            False,
            """Commit a call's outcome (optionally with a checkpoint, in one transaction).
        The same result again is a no-op; a different one raises ResultConflict.""",
        )
    )
    defer_result = deferrable(prepare="result")(
        _Commit(
            "defer_result",
            True,
            """``commit_result`` without waiting when the call's policy allows it (True: it
        rides on the run's next write), else at once (False). The arguments are checked
        and masked now either way.""",
        )
    )

    @operation()
    def get_call(journal: JournalBase, call_id: str) -> Plan[Call]:
        def op(tx: StoreTx) -> Call:
            call = tx.calls.get(call_id)
            if call is None:
                raise CallNotFound("no such call", call_id=call_id)
            return call

        return read(op)

    @operation()
    def list_calls(
        journal: JournalBase, run_id: str, *, from_seq: Mapping[int, int] | None = None
    ) -> Plan[list[Call]]:
        """The run's calls in journal order; with ``from_seq`` ({agent_no: seq}), only those
        at or past their agent's sequence number (every call of an agent not named)."""
        return read(lambda tx: tx.calls.list(run_id, None, from_seq))

    @operation()
    def open_intents(journal: JournalBase, run_id: str) -> Plan[list[Call]]:
        """Calls of the run whose intent is on disk without a result, oldest first."""
        return read(lambda tx: tx.calls.list(run_id, [CallState.OPEN]))


def _commit_result(
    journal: JournalBase,
    call_id: str,
    result: Any,
    failed: bool,
    checkpoint: CheckpointData | None,
) -> Plan[Call]:
    require_text("call_id", call_id)
    if checkpoint is not None and not isinstance(checkpoint, CheckpointData):
        raise InvalidArgument("checkpoint must be a CheckpointData", field="checkpoint")
    masked = mask_only(journal.masker, result)
    result_json = canonical_json(masked)  # refuses what cannot be stored
    result_digest = digest_text(result_json)
    state = CallState.FAILED if failed else CallState.COMPLETED
    now = journal.clock()
    cache_update: list[Any] = []

    @hot_path
    def op(tx: StoreTx) -> Call:
        cache_update.clear()  # a backend may run op again (e.g. after a conflict)
        closed = tx.calls.close_open(call_id, state, masked, result_json, result_digest, now)
        if closed is not None:  # the common case: an open call of an active run
            done, context_id = closed
            if checkpoint is not None:
                cache_update.append(
                    checkpoint_op(journal, tx, done.run_id, context_id, checkpoint, now)
                )
            return done
        call = tx.calls.get(call_id)
        if call is None:
            raise IntentMissing("no intent was journaled for this call", call_id=call_id)
        if call.state in RESULT_STATES:
            if call.result_digest == result_digest and call.state == state:
                return call
            raise ResultConflict(
                "the call already has a different committed result",
                call_id=call_id,
                recorded_digest=call.result_digest,
                new_digest=result_digest,
            )
        if call.state != CallState.OPEN:
            raise ResultConflict(
                f"the call was closed as {call.state}", call_id=call_id, state=call.state
            )
        run = load_run(tx, call.run_id)
        require_active(run)
        done = dataclasses.replace(
            call, state=state, result=masked, result_digest=result_digest, closed_at=now
        )
        tx.calls.update(done)
        bump(tx, run, now)
        if checkpoint is not None:
            cache_update.append(checkpoint_op(journal, tx, run.id, run.context_id, checkpoint, now))
        return done

    def after(call: Call) -> Call:
        apply_cache(journal, cache_update)
        return call

    return run_write(op, call_id=call_id, after=after)
