"""One writer thread per store: batches the writes of concurrent callers into one transaction.

Each caller's function runs inside its own savepoint, so a refusal rolls back only that
caller's writes. Callers are woken only after COMMIT returned (with synchronous=FULL, once
the WAL is on disk); if COMMIT fails, every caller in the batch gets the error.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from durability.errors import DurabilityError, JournalClosed
from durability.faults import crash_point

T = TypeVar("T")
MAX_BATCH = 256


class TransactionControl(Protocol):
    """The few statements the writer needs from an engine connection."""

    def begin(self) -> None: ...
    def savepoint(self) -> None: ...
    def release(self) -> None: ...
    def rollback_to_savepoint(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...


_STOP = object()


class GroupCommitWriter:
    def __init__(
        self,
        control: TransactionControl,
        tx: Any,
        translate: Callable[[BaseException], BaseException],
        name: str = "journal-writer",
    ) -> None:
        self._control = control
        self._tx = tx
        self._translate = translate
        self._queue: queue.Queue[Any] = queue.Queue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.batches = 0  # committed transactions, for tests and measurements

    def submit(self, fn: Callable[[Any], T]) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a journal write may not start another write")
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise JournalClosed("the journal is closed")
            self._queue.put((fn, future))
        return future.result()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join()

    def _next_batch(self) -> tuple[list[tuple[Callable[[Any], Any], Future[Any]]], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch = [first]
        stop = False
        while len(batch) < MAX_BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                stop = True
                break
            batch.append(item)
        return batch, stop

    def _run(self) -> None:
        stop = False
        while not stop:
            batch, stop = self._next_batch()
            if batch:
                self._commit_batch(batch)

    def _commit_batch(self, batch: list[tuple[Callable[[Any], Any], Future[Any]]]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            self._control.begin()
        except BaseException as exc:  # the database refused to start a transaction
            error = self._translate(exc)
            for _, future in batch:
                future.set_exception(error)
            return
        try:
            for fn, _ in batch:
                outcomes.append(self._run_one(fn))
            crash_point("journal.batch_before_commit")
            self._control.commit()
            self.batches += 1
            crash_point("journal.batch_after_commit")
        except BaseException as exc:
            try:
                self._control.rollback()
            except BaseException:
                pass
            error = self._translate(exc)
            for _, future in batch:
                future.set_exception(error)
            return
        for (_, future), (ok, value) in zip(batch, outcomes, strict=True):
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _run_one(self, fn: Callable[[Any], Any]) -> tuple[bool, Any]:
        self._control.savepoint()
        try:
            value = fn(self._tx)
        except DurabilityError as exc:
            if exc.keeps_writes:
                self._control.release()
            else:
                self._control.rollback_to_savepoint()
            return False, exc
        except BaseException as exc:
            self._control.rollback_to_savepoint()
            return False, self._translate(exc)
        self._control.release()
        return True, value
