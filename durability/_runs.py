"""Run-state rules shared by the journal's policies: version bumps and transitions."""

from __future__ import annotations

import dataclasses
from typing import Any

from durability.errors import (
    InvalidTransition,
    OpenIntents,
    RunNotActive,
    RunNotFound,
    StaleVersion,
)
from durability.records import TERMINAL_RUN_STATUSES, Run
from durability.status import CallState, RunStatus
from durability.store.base import StoreTx


def load_run(tx: StoreTx, run_id: str) -> Run:
    run = tx.runs.get(run_id)
    if run is None:
        raise RunNotFound("no such run", run_id=run_id)
    return run


def stale(run: Run, version: int, since: str = "this decision was made") -> StaleVersion:
    """The refusal of a change made against ``version`` when ``run`` is at another one."""
    return StaleVersion(
        f"the run changed since {since}",
        run_id=run.id,
        version=version,
        current_version=run.version,
        status=run.status,
    )


def require_active(run: Run) -> None:
    if run.status != RunStatus.ACTIVE:
        raise RunNotActive(f"the run is {run.status}, not active", run_id=run.id, status=run.status)


def bump(tx: StoreTx, run: Run, now: float, **changes: Any) -> Run:
    """Save ``changes`` to the run with version + 1 (every state change bumps the version)."""
    updated = dataclasses.replace(run, version=run.version + 1, updated_at=now, **changes)
    tx.runs.update(updated)
    return updated


def transition(
    tx: StoreTx, run: Run, status: str, now: float, reason: str | None = None, detail: Any = None
) -> Run:
    """Move a run to ``status`` under the lifecycle rules (no-op when already there)."""
    if run.status == status:
        return run
    if run.status in TERMINAL_RUN_STATUSES:
        raise InvalidTransition(
            f"the run is already {run.status}", run_id=run.id, status=run.status, wanted=status
        )
    if run.status == RunStatus.NEEDS_ATTENTION and status == RunStatus.ACTIVE:
        raise InvalidTransition(
            "a held run becomes active again only through a decision",
            run_id=run.id,
            status=run.status,
            wanted=status,
        )
    if status in TERMINAL_RUN_STATUSES:
        open_calls = tx.calls.list(run.id, [CallState.OPEN])
        if open_calls:  # only the stop decision ends a run with open calls (abandoning them)
            raise OpenIntents(
                "the run still has calls without a result",
                run_id=run.id,
                status=run.status,
                wanted=status,
                call_ids=[c.id for c in open_calls[:10]],
            )
    return bump(tx, run, now, status=status, reason=reason, reason_detail=detail)
