"""Deferred writes: a result or a checkpoint that rides on the run's next write.

DESIGN.md section 4: an intent is on disk before its effect and never shares a transaction
with its own result; a result and a checkpoint may share one. Nothing keeps a result from
sharing a transaction with the run's *next* intent, and that makes a steady step one
durable commit instead of two. A deferred write is handed to the store's writer without
waiting (``Store.defer``); it commits in the same transaction as the next write submitted,
or in an earlier one (order is kept), or on its own after ``defer_seconds``, or when the
journal closes, or before any read of the journal. So an effect never starts before every
result the run consumed before it is durable: its intent cannot be on disk without them.

Only writes whose loss recovery repairs without a person are deferred (docs/durability.md,
"Results ride on the next write"): checkpoints (derived state; a resume starts from the one
before and reuses the committed results), and results of calls whose policy is
``safe_replay`` (an open intent of an allowlisted tool is replayed). Every other result
(model calls, whose open intent is held; adapter tools; anything else) commits at once: the
journal decides from the policy the intent was recorded with, never from the caller.

A deferred write the store refuses is logged (masked) and remembered for its run: the
run's next write that names the run fails with ``deferred_write_refused`` and writes
nothing (the refusal is checked inside that write's transaction, after every write ahead of
it). PostgreSQL and a shared worker's fenced writes commit at once: ``defer_result`` and
``defer_checkpoint`` then behave as ``commit_result`` and ``write_checkpoint``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from durability.errors import DeferredWriteRefused
from durability.journal._plan import Plan
from durability.masking import Masker
from durability.records import Call
from durability.status import CallState, Policy
from durability.store.base import Store, StoreTx

T = TypeVar("T")
logger = logging.getLogger("a0.durability.journal")

#: Policies whose results may be deferred (durability/recovery.py: an open intent with
#: this policy is replayed when its tool is on the allowlist; otherwise it is held, as an
#: open intent would have been had the process died before the result anyway).
DEFERRABLE_POLICIES = frozenset({Policy.SAFE_REPLAY})
#: Open calls remembered as deferrable (oldest forgotten first: their result then commits
#: at once, which is always allowed).
MAX_TRACKED_CALLS = 4096


class Deferrals:
    """One journal's deferred writes: which calls may defer, and refusals not yet told."""

    def __init__(
        self, store: Store, masker: Callable[[], Masker], seconds: float, *, fenced: bool
    ) -> None:
        """``masker`` gives the journal's current masker (for the log line of a refusal);
        ``fenced``: a shared worker's writes are fenced, and commit at once."""
        self._store = store
        self._masker = masker
        self.enabled = seconds > 0 and store.deferred_writes and not fenced
        if self.enabled:
            store.defer_seconds = seconds
        self.refused: dict[str, BaseException] = {}  # run id -> its deferred write's error
        self.calls: dict[str, str] = {}  # open deferrable call id -> run id

    def note_intent(self, call: Call) -> Call:
        """After ``record_intent``: remember an open call whose result may be deferred."""
        if self.enabled and call.state == CallState.OPEN and call.policy in DEFERRABLE_POLICIES:
            calls = self.calls
            calls[call.id] = call.run_id
            if len(calls) > MAX_TRACKED_CALLS:
                del calls[next(iter(calls))]
        return call

    def guard(self, op: Callable[[StoreTx], T], run_id: str) -> Callable[[StoreTx], T]:
        """``op``, refused (writing nothing) when a deferred write of the run was: the
        refusal is told once, to this write (again if its transaction is run again)."""
        if not self.enabled:
            return op
        refused = self.refused
        told: list[BaseException] = []

        def guarded(tx: StoreTx) -> T:
            error = told[0] if told else refused.pop(run_id, None)
            if error is not None:
                told[:] = [error]
                raise DeferredWriteRefused(
                    "an earlier result or checkpoint of this run, committed after it was"
                    " handed over, was refused; nothing of this write was committed",
                    run_id=run_id,
                    refused_code=str(getattr(error, "code", "storage_error")),
                ) from error
            return op(tx)

        return guarded

    def defer(self, plan: Plan[Any], run_id: str) -> None:
        """Hand ``plan`` to the store's writer without waiting for its commit. Its refusal
        is noted for the run once, as soon as it is known: a write behind it in the same
        batch must see it."""
        op, after, refused = plan.op, plan.after, self.refused
        noted: list[bool] = []

        def note(error: BaseException) -> None:
            if not noted:
                noted.append(True)
                refused[run_id] = error

        def noting(tx: StoreTx) -> Any:
            try:
                return op(tx)
            except BaseException as exc:
                note(exc)
                raise

        def on_done(value: Any, error: BaseException | None) -> None:
            if error is None:
                if after is not None:
                    after(value)
                return
            note(error)  # e.g. COMMIT itself failed after the write ran
            self._log(run_id, error)

        self._store.defer(noting, on_done, plan.defer_within)

    def _log(self, run_id: str, error: BaseException) -> None:
        code = str(getattr(error, "code", type(error).__name__))
        message = self._masker().mask(str(getattr(error, "message", error))[:300])
        logger.warning(
            "a deferred write of run %s was refused (%s: %s); the run's next write fails"
            " with deferred_write_refused",
            run_id,
            code,
            message,
        )
