"""One group-commit batch as one transaction (durability/store/_group_commit.py queues them).

A batch first runs its writes one after another with no savepoints. If a write is refused
(a ``DurabilityError`` that keeps no writes) or fails, the transaction is rolled back and
the batch runs again with each write inside its own savepoint, so a refusal rolls back
only that caller's writes. If COMMIT fails, every write in the batch gets the error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from durability.errors import DurabilityError
from durability.failpoints import failpoint


class TransactionControl(Protocol):
    """The few statements the writer needs from an engine connection."""

    def begin(self) -> None: ...
    def savepoint(self) -> None: ...
    def release(self) -> None: ...
    def rollback_to_savepoint(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...


class Slot(Protocol):
    """A queued write and where its outcome goes."""

    fn: Callable[[Any], Any]
    value: Any
    error: BaseException | None


class Batches:
    """Runs batches of writes on one connection (its ``tx``), each as one transaction."""

    def __init__(
        self,
        control: TransactionControl,
        tx: Any,
        translate: Callable[[BaseException], BaseException],
    ) -> None:
        self.control = control
        self.tx = tx
        self.translate = translate
        self.committed = 0  # committed transactions, for tests and measurements
        self.retried = 0  # batches run again with savepoints after a refusal

    def _fail_all(self, batch: Sequence[Slot], exc: BaseException) -> None:
        error = self.translate(exc)
        for slot in batch:
            slot.value, slot.error = None, error

    def commit(self, batch: Sequence[Slot]) -> None:
        """Run ``batch`` in one transaction and commit it; each slot gets its outcome."""
        try:
            self.control.begin()
        except BaseException as exc:  # the database refused to start a transaction
            self._fail_all(batch, exc)
            return
        try:
            outcomes = self._run_plain(batch)
            if outcomes is None:  # a write was refused: again, each in its savepoint
                self.control.rollback()
                self.retried += 1
                self.control.begin()
                outcomes = [self._run_one(slot.fn) for slot in batch]
            if any(keep for _, _, keep in outcomes):
                failpoint("journal.batch_before_commit")
                self.control.commit()
                self.committed += 1
                failpoint("journal.batch_after_commit")
            else:  # nothing to keep: every write in the batch was refused
                self.control.rollback()
        except BaseException as exc:
            try:
                self.control.rollback()
            except BaseException:
                pass
            self._fail_all(batch, exc)
            return
        for slot, (ok, value, _) in zip(batch, outcomes, strict=True):
            if ok:
                slot.value = value
            else:
                slot.error = value

    def _run_plain(self, batch: Sequence[Slot]) -> list[tuple[bool, Any, bool]] | None:
        """Every write in the open transaction, no savepoints; None when one was refused
        (the transaction must then be rolled back). A lone write is its own savepoint: its
        refusal is final."""
        outcomes: list[tuple[bool, Any, bool]] = []
        alone = len(batch) == 1
        for slot in batch:
            try:
                outcomes.append((True, slot.fn(self.tx), True))
            except DurabilityError as exc:
                if not exc.keeps_writes and not alone:
                    return None
                outcomes.append((False, exc, exc.keeps_writes))
            except BaseException as exc:
                if not alone:
                    return None
                outcomes.append((False, self.translate(exc), False))
        return outcomes

    def _run_one(self, fn: Callable[[Any], Any]) -> tuple[bool, Any, bool]:
        self.control.savepoint()
        try:
            value = fn(self.tx)
        except DurabilityError as exc:
            if exc.keeps_writes:
                self.control.release()
            else:
                self.control.rollback_to_savepoint()
            return False, exc, exc.keeps_writes
        except BaseException as exc:
            self.control.rollback_to_savepoint()
            return False, self.translate(exc), False
        self.control.release()
        return True, value, True
