"""Group commit: the writes of concurrent callers share one transaction.

There is no writer thread. A caller queues its write; if no transaction is in flight, the
caller becomes the *leader*: it takes every queued write (its own included), runs them in
one transaction on the store's single writer connection, commits, and answers each caller.
Callers that queue while a leader commits wait; the next leader takes them all together.
A lone caller therefore runs its own write in its own thread, with no hand-off.

With more than one write in a batch, each runs inside its own savepoint so a refusal rolls
back only that caller's writes; a lone write needs no savepoint (a refusal rolls back the
transaction, or commits it when the refusal keeps its writes). Callers are answered only
after COMMIT returned (with synchronous=FULL, once the WAL is on disk); if COMMIT fails,
every caller in the batch gets the error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from durability.errors import DurabilityError, JournalClosed
from durability.failpoints import failpoint

T = TypeVar("T")
MAX_BATCH = 256


class _Outcome:
    """One caller's answer (lighter than a Future: the writer's condition guards it)."""

    __slots__ = ("done", "error", "value")

    def __init__(self) -> None:
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def set_result(self, value: Any) -> None:
        self.value, self.done = value, True

    def set_exception(self, error: BaseException) -> None:
        self.error, self.done = error, True

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


_Item = tuple[Callable[[Any], Any], _Outcome]


class TransactionControl(Protocol):
    """The few statements the writer needs from an engine connection."""

    def begin(self) -> None: ...
    def savepoint(self) -> None: ...
    def release(self) -> None: ...
    def rollback_to_savepoint(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...


class GroupCommitWriter:
    def __init__(
        self,
        control: TransactionControl,
        tx: Any,
        translate: Callable[[BaseException], BaseException],
        name: str = "journal-writer",
    ) -> None:
        self.name = name
        self._control = control
        self._tx = tx
        self._translate = translate
        self._pending: list[_Item] = []
        self._cond = threading.Condition()
        self._leader: int | None = None  # thread id of the caller running a batch
        self._closed = False
        self.batches = 0  # committed transactions, for tests and measurements

    @property
    def pending(self) -> int:
        """Writes queued behind the batch in flight."""
        with self._cond:
            return len(self._pending)

    def submit(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(tx)`` in a transaction; return once that transaction is durable."""
        future = _Outcome()
        with self._cond:
            if self._leader == threading.get_ident():
                raise RuntimeError("a journal write may not start another write")
            if self._closed:
                raise JournalClosed("the journal is closed")
            self._pending.append((fn, future))
        while True:
            with self._cond:
                while not future.done and self._leader is not None:
                    self._cond.wait()
                if future.done:
                    return future.result()  # type: ignore[no-any-return]
                self._leader = threading.get_ident()
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
            try:
                self._commit_batch(batch)
            finally:
                with self._cond:
                    self._leader = None
                    self._cond.notify_all()

    def close(self) -> None:
        """Refuse new writes; wait until every queued write is answered."""
        with self._cond:
            self._closed = True
            while self._leader is not None or self._pending:
                self._cond.wait()

    def _fail_all(self, batch: list[_Item], exc: BaseException) -> None:
        error = self._translate(exc)
        for _, future in batch:
            future.set_exception(error)

    def _commit_batch(self, batch: list[_Item]) -> None:
        try:
            self._control.begin()
        except BaseException as exc:  # the database refused to start a transaction
            self._fail_all(batch, exc)
            return
        try:
            if len(batch) == 1:
                outcomes = [self._run_alone(batch[0][0])]
            else:
                outcomes = [self._run_one(fn) for fn, _ in batch]
            if any(keep for _, _, keep in outcomes):
                failpoint("journal.batch_before_commit")
                self._control.commit()
                self.batches += 1
                failpoint("journal.batch_after_commit")
            else:  # nothing to keep: every write in the batch was refused
                self._control.rollback()
        except BaseException as exc:
            try:
                self._control.rollback()
            except BaseException:
                pass
            self._fail_all(batch, exc)
            return
        for (_, future), (ok, value, _) in zip(batch, outcomes, strict=True):
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _run_alone(self, fn: Callable[[Any], Any]) -> tuple[bool, Any, bool]:
        """A lone write: the transaction itself is its savepoint."""
        try:
            return True, fn(self._tx), True
        except DurabilityError as exc:
            return False, exc, exc.keeps_writes
        except BaseException as exc:
            return False, self._translate(exc), False

    def _run_one(self, fn: Callable[[Any], Any]) -> tuple[bool, Any, bool]:
        self._control.savepoint()
        try:
            value = fn(self._tx)
        except DurabilityError as exc:
            if exc.keeps_writes:
                self._control.release()
            else:
                self._control.rollback_to_savepoint()
            return False, exc, exc.keeps_writes
        except BaseException as exc:
            self._control.rollback_to_savepoint()
            return False, self._translate(exc), False
        self._control.release()
        return True, value, True
