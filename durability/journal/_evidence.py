"""A held run whose evidence changed: re-classified from the evidence, not by a person.

``reclassify`` is the one way a held run becomes active again without a decision: its
uncertain call's receipt now proves something (python/durable/recheck.py asks). In one
transaction the run becomes active, the call is closed as the evidence says (completed with
the receipt's output; not started: closed ``not_completed``, so the loop runs it as its first
real execution; still running: left open, the loop watches it) and an ``evidence_changed``
event records what changed, for the Recovery panel and the chat.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from durability._runs import bump, load_run, stale
from durability.canonical import canonical_json, digest, digest_text
from durability.errors import CallNotFound, InvalidArgument, NoOpenCall, RunNotHeld
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan, write
from durability.journal._validation import mask_only, mask_storable, require_int, require_text
from durability.records import Run
from durability.status import CallState, EvidenceOutcome, RunStatus
from durability.store.base import StoreTx

#: The event a re-classification leaves (its payload says what changed).
EVIDENCE_CHANGED = "evidence_changed"
#: What the evidence may prove: the call completed, never started, or still runs.
OUTCOMES = tuple(EvidenceOutcome)


class EvidenceOps:
    """Re-classifying a held run from new evidence."""

    @operation(prepare="result")
    def reclassify(
        journal: JournalBase,
        run_id: str,
        *,
        version: int,
        call_id: str,
        outcome: str,
        result: Any = None,
        change: Any = None,
    ) -> Plan[Run]:
        """Make the held run (at ``version``) active again from its call's new evidence."""
        if outcome not in OUTCOMES:
            raise InvalidArgument(f"outcome must be one of {', '.join(OUTCOMES)}", field="outcome")
        require_int("version", version, minimum=1)
        require_text("call_id", call_id)
        masked = mask_only(journal.masker, result)
        result_json = canonical_json(masked)
        result_digest = digest_text(result_json)
        payload = mask_storable(
            journal.masker, {"call_id": call_id, "outcome": outcome, **dict(change or {})}
        )
        now = journal.clock()

        def op(tx: StoreTx) -> Run:
            run = load_run(tx, run_id)
            if run.status != RunStatus.NEEDS_ATTENTION:
                raise RunNotHeld("the run is not held", run_id=run_id, status=run.status)
            if run.version != version:
                raise stale(run, version, "its evidence was read")
            call = tx.calls.get(call_id)
            if call is None or call.run_id != run_id:
                raise CallNotFound("no such call in this run", run_id=run_id, call_id=call_id)
            if call.state != CallState.OPEN:
                raise NoOpenCall("the call is not uncertain", call_id=call_id, state=call.state)
            updated = bump(tx, run, now, status=RunStatus.ACTIVE, reason=None, reason_detail=None)
            if outcome == EvidenceOutcome.COMPLETED:
                tx.calls.close_open(
                    call_id, CallState.COMPLETED, masked, result_json, result_digest, now
                )
                updated = load_run(tx, run_id)
            elif outcome == EvidenceOutcome.NOT_STARTED:
                closed = dataclasses.replace(call, state=CallState.NOT_COMPLETED, closed_at=now)
                tx.calls.update(closed)
            tx.events.insert(
                run.context_id, run_id, EVIDENCE_CHANGED, payload, now, digest(payload)
            )
            return updated

        return write(op)  # as a decision: a shared worker then takes the run's claim
