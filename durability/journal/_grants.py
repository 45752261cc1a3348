"""Retry model call (a decision that grants retries and runs the held model call again) and
standing retry grants (the same decision made in advance for a chat, a profile or a task).

``retry_model_call`` is a decision on a named version, like the five (stale versions are
refused, the same decision twice applies once): it records a retry grant of ``attempts``,
supersedes the held model call at once (one attempt used: the next intent at its position
is attempt + 1, whatever its messages now are) and makes the run active again.

A standing grant allows ``attempts`` retries per run for every run of its scope; the glue
names a run's scopes (``scopes``: (scope, target) pairs, most specific first). A use is
recorded against the run and the call it retried, so every run shows which grant it used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durability import _decisions, decision_fit
from durability._runs import bump, load_run
from durability.errors import (
    CallNotFound,
    DecisionNotApplicable,
    InvalidArgument,
    InvalidTransition,
    RunNotHeld,
)
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan, read, run_write, write
from durability.journal._validation import require_int, require_text
from durability.records import (
    MAX_RETRY_ATTEMPTS,
    STANDING_SCOPES,
    Call,
    DecisionOutcome,
    DecisionRequest,
    StandingGrant,
    StandingGrantUse,
)
from durability.status import CallKind, CallState, RunStatus
from durability.store.base import StoreTx

SCOPES = STANDING_SCOPES
Scopes = Sequence[tuple[str, str]]


def require_attempts(attempts: int, minimum: int) -> None:
    """Refuse (``invalid_argument``) a count of retries below ``minimum`` or above the most
    one grant may allow (a retry grant, retry_model_call, a standing grant)."""
    require_int("attempts", attempts, minimum=minimum)
    if attempts > MAX_RETRY_ATTEMPTS:
        raise InvalidArgument(f"attempts must be at most {MAX_RETRY_ATTEMPTS}", field="attempts")


def _supersede(tx: StoreTx, call: Call, now: float) -> None:
    tx.calls.update(dataclasses.replace(call, state=CallState.SUPERSEDED, closed_at=now))


def available_standing(tx: StoreTx, run_id: str, scopes: Scopes) -> StandingGrant | None:
    """The first grant in force among ``scopes`` with a retry left for this run."""
    used: dict[int, int] = {}
    for use in tx.standing.uses(run_id):
        used[use.grant_id] = used.get(use.grant_id, 0) + 1
    for scope, target in scopes:
        grant = tx.standing.in_force(scope, target) if target else None
        if grant is not None and grant.attempts > used.get(grant.id, 0):
            return grant
    return None


def use_standing(tx: StoreTx, run_id: str, call: Call, scopes: Scopes, now: float) -> bool:
    """Pay one retry of ``call`` with a standing grant, if one covers the run."""
    grant = available_standing(tx, run_id, scopes)
    if grant is None:
        return False
    tx.standing.use(grant.id, run_id, call.id, now)
    return True


def retry_model_call(request: DecisionRequest, now: float) -> Plan[DecisionOutcome]:
    """Grant ``request.attempts`` retries and run the held model call again (see above):
    ``Journal.decide`` of ``retry_model_call``, the request checked and its note masked."""
    run_id, attempts, kind = request.run_id, request.attempts, decision_fit.RETRY_MODEL_CALL

    def op(tx: StoreTx) -> DecisionOutcome:
        run, prior = _decisions.on_version(tx, request, None)  # whichever call it named
        if prior is not None:
            return prior
        if run.status != RunStatus.NEEDS_ATTENTION:
            raise RunNotHeld("the run is not waiting for a decision", run_id=run_id)
        calls = tx.calls.list(run_id)
        why = decision_fit.refusal(run, calls, kind)
        call = decision_fit.held_model_call(run, calls)
        if why is not None or call is None:
            raise DecisionNotApplicable(
                why or "no model call is held", run_id=run_id, decision=kind
            )
        grant_id = tx.grants.insert(run_id, attempts, request.actor, now)
        if not tx.grants.consume(run_id):  # pragma: no cover - the grant was just made
            raise InvalidTransition("the retry grant could not be used", grant_id=grant_id)
        _supersede(tx, call, now)
        updated = bump(tx, run, now, status=RunStatus.ACTIVE, reason=None, reason_detail=None)
        return _decisions.record(tx, request, call.id, updated, now)

    # a person's decision: not fenced (any shared worker serves it, the run's version
    # guards it, durability/cluster.py); the claim holder or a sweeper resumes the run
    return write(op)


class GrantOps:
    """Retry model call, standing grants and the history of decided runs."""

    @operation()
    def grant_standing(
        journal: JournalBase,
        scope: str,
        target: str,
        attempts: int,
        *,
        actor: str,
        note: str | None = None,
    ) -> Plan[StandingGrant]:
        """Authorise ``attempts`` automatic model-call retries per run for every run of a
        chat, a profile or a task (0 withdraws the grant in force)."""
        if scope not in SCOPES:
            raise InvalidArgument(f"scope must be one of {', '.join(SCOPES)}", field="scope")
        require_text("target", target)
        require_attempts(attempts, 0)
        require_text("actor", actor)
        masked_note = journal.masker.mask_text(note) if note else None
        now = journal.clock()

        def op(tx: StoreTx) -> StandingGrant:
            grant = StandingGrant(0, scope, target, attempts, actor, masked_note, now)
            return dataclasses.replace(grant, id=tx.standing.insert(grant))

        return write(op)

    @operation()
    def standing_grants(journal: JournalBase, limit: int = 100) -> Plan[list[StandingGrant]]:
        """Every standing grant, newest first (the newest of a scope and target is in force)."""
        require_int("limit", limit, minimum=1)
        return read(lambda tx: tx.standing.list(limit))

    @operation()
    def standing_grant_for(
        journal: JournalBase, run_id: str, scopes: Scopes
    ) -> Plan[StandingGrant | None]:
        """The standing grant that would pay the run's next model-call retry, if any."""
        return read(lambda tx: available_standing(tx, run_id, list(scopes)))

    @operation()
    def use_standing_grant(
        journal: JournalBase, run_id: str, call_id: str, scopes: Scopes
    ) -> Plan[bool]:
        """Retry an open or failed model call with a standing grant: the call is superseded
        (the next intent at its position is attempt + 1) and the use recorded. False when no
        grant covers the run any more."""
        now = journal.clock()

        def op(tx: StoreTx) -> bool:
            run = load_run(tx, run_id)
            call = tx.calls.get(call_id)
            if call is None or call.run_id != run_id:
                raise CallNotFound("no such call in this run", run_id=run_id, call_id=call_id)
            if call.kind != CallKind.MODEL or call.state not in (CallState.OPEN, CallState.FAILED):
                raise InvalidTransition(
                    "only an open or failed model call is retried", call_id=call_id
                )
            if not use_standing(tx, run_id, call, list(scopes), now):
                return False
            _supersede(tx, call, now)
            bump(tx, run, now)
            return True

        return run_write(op, run_id=run_id)

    @operation()
    def standing_grant_uses(
        journal: JournalBase, run_id: str
    ) -> Plan[list[tuple[StandingGrantUse, StandingGrant | None]]]:
        """The standing grants a run used, with each grant (who authorised it, and why)."""

        def op(tx: StoreTx) -> list[tuple[StandingGrantUse, StandingGrant | None]]:
            return [(use, tx.standing.get(use.grant_id)) for use in tx.standing.uses(run_id)]

        return read(op)

    @operation()
    def decided_runs(journal: JournalBase, limit: int = 50) -> Plan[list[str]]:
        """The runs a person decided on, the most recently decided first."""
        require_int("limit", limit, minimum=1)
        return read(lambda tx: tx.decisions.decided_runs(limit))
