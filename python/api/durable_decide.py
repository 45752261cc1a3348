"""POST /api/durable_decide: a person's decision on a held run, made on a named version: one
of the five, or ``retry_model_call`` (with ``attempts``, default 1) for a run held at a
model call. A decision that does not fit the hold is refused (``decision_not_applicable``);
``durable_run`` lists the decisions that fit and why the others do not."""

from __future__ import annotations

from typing import Any

from durability.decision_fit import RETRY_MODEL_CALL
from durability.records import (
    DECISIONS,
    DECISIONS_NEEDING_NOTE,
    MAX_RETRY_ATTEMPTS,
    DecisionRequest,
)
from python.api._durable_runs import actor_of, detail_row, require_run_id
from python.durable import decisions
from python.server.api import ApiError, ApiHandler, bad_request, get_int, get_str


class DurableDecide(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        journal = self.runtime.journal
        run_id = require_run_id(input)
        decision = get_str(input, "decision", required=True)
        choices = (*DECISIONS, RETRY_MODEL_CALL)
        if decision not in choices:
            raise bad_request(f"'decision' must be one of {', '.join(choices)}")
        attempts = get_int(input, "attempts", default=1, minimum=1)
        if attempts > MAX_RETRY_ATTEMPTS:
            raise bad_request(f"'attempts' must be at most {MAX_RETRY_ATTEMPTS}")
        if input.get("expected_version") is None:
            raise bad_request("'expected_version' is required")
        version = get_int(input, "expected_version", minimum=1)
        note = get_str(input, "note") or None
        call_id = get_str(input, "call_id") or None
        if decision in DECISIONS_NEEDING_NOTE and not (note or "").strip():
            raise ApiError("note_required", f"'{decision}' needs a note saying what was checked.")
        actor = actor_of(request, self.runtime)
        decided = DecisionRequest(
            run_id,
            decision,
            version=version,
            actor=actor,
            note=note,
            call_id=call_id,
            attempts=attempts,
        )
        outcome = await decisions.apply_decision(self.runtime.chats, decided)
        detail = await journal.aio.read_run(run_id)
        return {"applied": outcome.applied, "run": detail_row(detail)}
