"""A call's result and the writes it made, in one transaction (the ``journal_atomic``
replay class: DESIGN section 5).

A tool whose effect lives in the journal's own database (a memory saved, deleted or
forgotten; one knowledge file imported) hands its writes to ``commit_result_with`` instead
of running them itself. They commit together with the call's result or not at all, so
after a crash either both are there (the result is reused) or neither is (the call runs
again): the effect happens exactly once and nothing needs a person.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from durability.errors import InvalidArgument
from durability.failpoints import ATOMIC_POINTS, failpoint
from durability.journal._calls import _commit_result
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan
from durability.records import Call
from durability.status import RESULT_STATES
from durability.store.base import StoreTx

#: A failpoint between a call's writes and its result, inside their one transaction.
WRITES_APPLIED = ATOMIC_POINTS[0]


@dataclass(frozen=True)
class CommittedWith:
    """The committed call, and what each write returned (None for every write when the
    call had this result already: the writes were committed with it then, not again)."""

    call: Call
    outputs: tuple[Any, ...]
    applied: bool


class AtomicOps:
    """A call's result together with its own writes."""

    @operation(prepare="result")
    def commit_result_with(
        journal: JournalBase,
        call_id: str,
        result: Any,
        writes: Sequence[Callable[[StoreTx], Any]],
        *,
        failed: bool = False,
    ) -> Plan[CommittedWith]:
        """Commit ``result`` for the open call ``call_id`` and run ``writes`` (transaction
        functions, e.g. durability.memory's ``save_write``) in the same transaction. The
        same result again is a no-op that runs no write; a different one raises
        ResultConflict and nothing is written."""
        if isinstance(writes, Callable) or not all(callable(w) for w in writes):  # type: ignore[arg-type]
            raise InvalidArgument("writes must be a list of transaction functions", field="writes")
        todo = tuple(writes)
        plan = _commit_result(journal, call_id, result, failed, None)
        commit = plan.op

        def op(tx: StoreTx) -> CommittedWith:
            before = tx.calls.get(call_id)
            if before is not None and before.state in RESULT_STATES:
                return CommittedWith(commit(tx), (None,) * len(todo), False)
            outputs = tuple(write(tx) for write in todo)
            failpoint(WRITES_APPLIED)
            return CommittedWith(commit(tx), outputs, True)

        after = plan.after

        def done(value: CommittedWith) -> CommittedWith:
            if after is None:
                return value
            return CommittedWith(after(value.call), value.outputs, value.applied)

        return Plan(op, fenced=plan.fenced, run_id=plan.run_id, call_id=plan.call_id, after=done)
