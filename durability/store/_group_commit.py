"""Group commit: the writes of concurrent callers share one transaction.

Writes queue; one *leader* at a time takes every queued write (up to MAX_BATCH), runs them
in one transaction on the store's single writer connection, commits, and answers each
caller. Who leads:

- a thread calling ``submit`` with no batch in flight leads its own write in its own
  thread (no queue, no thread switch);
- a thread that queued behind a batch sleeps on a lock of its own and is woken exactly
  once: with its answer, or to lead the next batch (which holds its write);
- writes from an event loop (``submit_async``) never block the loop: when no leader is
  running, the writer's own thread (started on first use) leads; answers go back to each
  loop in one ``call_soon_threadsafe`` per batch.

Only the callers whose batch finished are woken (no ``notify_all``).

A *deferred* write (``defer``) has no caller waiting: it is parked, and the next write
submitted (by any caller) takes every parked write along, ahead of itself, into its batch:
they commit in the same transaction as that write, or in an earlier one, never later.
Nothing submitted within ``defer_seconds`` (or a parked write's own ``within``, the
soonest of them): the writer's thread commits what is parked on its own. ``flush``
returns once every deferred write handed over so far is answered; ``close`` commits what
is parked before it returns. A deferred write's outcome goes to its ``on_done(value,
error)``, called by the leader after the batch, before the batch's callers are woken
(docs/durability.md, "Results ride on the next write").

A batch (durability/store/_batch.py) first runs its writes one after another with no
savepoints. If a write is refused
(a ``DurabilityError`` that keeps no writes) or fails, the transaction is rolled back and
the batch runs again with each write inside its own savepoint, so a refusal rolls back
only that caller's writes (the writes are functions of the transaction, run again from the
start as PostgreSQL's retries do). Callers are answered only after COMMIT returned (with
synchronous=FULL, once the WAL is on disk); if COMMIT fails, every caller in the batch gets
the error.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, overload

from durability.errors import JournalClosed
from durability.store._batch import Batches, TransactionControl

T = TypeVar("T")
MAX_BATCH = 256
_WRITER = -1  # the leader token of the writer's own thread
#: Longest a deferred write waits for a write to ride on before it commits on its own.
DEFAULT_DEFER_SECONDS = 0.005
OnDone = Callable[[Any, BaseException | None], None]


def _nothing(tx: Any) -> None:
    """The write ``flush`` submits: it carries every parked write and adds nothing."""


class _Slot:
    """One queued write and its answer (the writer's lock guards the fields)."""

    __slots__ = (
        "deadline",
        "done",
        "error",
        "fn",
        "future",
        "lead",
        "loop",
        "on_done",
        "value",
        "wake",
    )

    def __init__(self, fn: Callable[[Any], Any], on_done: OnDone | None = None) -> None:
        self.fn = fn
        self.on_done = on_done  # set only for a deferred write (nobody waits for it)
        self.deadline = 0.0  # a deferred write commits on its own by then
        self.done = False
        self.lead = False  # handed the leadership while queued
        self.value: Any = None
        self.error: BaseException | None = None
        self.wake: Any = None  # a held lock the waiting thread blocks on (sync callers)
        self.loop: asyncio.AbstractEventLoop | None = None  # async callers
        self.future: asyncio.Future[Any] | None = None

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _resolve(slots: list[_Slot]) -> None:
    """On the caller's loop: hand each awaiting task its answer."""
    for slot in slots:
        future = slot.future
        if future is None or future.done():  # the awaiting task was cancelled
            continue
        if slot.error is not None:
            future.set_exception(slot.error)
        else:
            future.set_result(slot.value)


class Count:
    """A count one part of an object keeps (the attribute ``part``), read as the object's
    own: ``batches = Count("_batches", "committed", "Committed transactions.")``."""

    def __init__(self, part: str, name: str, doc: str) -> None:
        self.part, self.name, self.__doc__ = part, name, doc

    @overload
    def __get__(self, obj: None, owner: type) -> Count: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> int: ...

    def __get__(self, obj: object, owner: type | None = None) -> Count | int:
        if obj is None:
            return self
        return int(getattr(getattr(obj, self.part), self.name))


class GroupCommitWriter:
    def __init__(
        self,
        control: TransactionControl,
        tx: Any,
        translate: Callable[[BaseException], BaseException],
        name: str = "journal-writer",
    ) -> None:
        self.name = name
        self._batches = Batches(control, tx, translate)
        self._pending: list[_Slot] = []
        self._parked: list[_Slot] = []  # deferred writes waiting for a write to ride on
        self._unsettled = 0  # deferred writes handed over and not yet answered
        self._timer_due: float | None = None  # when the writer thread's timed wait ends
        self.defer_seconds = DEFAULT_DEFER_SECONDS
        self._lock = threading.Lock()
        self._writer_turn = threading.Condition(self._lock)  # the writer thread waits here
        self._idle = threading.Condition(self._lock)  # close() waits here
        self._leader: int | None = None  # leader token: a caller's slot id, or _WRITER
        self._running: int | None = None  # thread id of the thread running a batch
        self._thread: threading.Thread | None = None
        self._closed = False
        self.wakeups = 0  # waiting threads woken (each queued caller once), for tests
        self.deferred_alone = 0  # deferred writes committed with nothing to ride on

    batches = Count("_batches", "committed", "Committed transactions, for tests and measurements.")
    retried_batches = Count(
        "_batches", "retried", "Batches run again with savepoints after a refusal."
    )

    @property
    def pending(self) -> int:
        """Writes queued behind the batch in flight."""
        with self._lock:
            return len(self._pending)

    @property
    def unsettled(self) -> int:
        """Deferred writes handed over and not answered yet (parked or in a batch)."""
        return self._unsettled

    def _carry_parked(self) -> None:
        """Under the lock: the parked writes go ahead of whatever is queued next."""
        if self._parked:
            self._pending.extend(self._parked)
            self._parked.clear()

    # submitting
    def submit(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn(tx)`` in a transaction; return once that transaction is durable."""
        slot = _Slot(fn)
        with self._lock:
            if self._running == threading.get_ident():
                raise RuntimeError("a journal write may not start another write")
            if self._closed:
                raise JournalClosed("the journal is closed")
            self._carry_parked()
            self._pending.append(slot)
            lead = self._leader is None
            if lead:
                self._leader = id(slot)
            else:
                slot.wake = threading.Lock()
                slot.wake.acquire()
        if not lead:
            slot.wake.acquire()  # released once: answered, or handed the leadership
            if slot.done:
                return slot.result()  # type: ignore[no-any-return]
        self._lead(slot)
        return slot.result()  # type: ignore[no-any-return]

    async def submit_async(self, fn: Callable[[Any], T]) -> T:
        """The same from an event loop: the loop never waits for the disk."""
        loop = asyncio.get_running_loop()
        slot = _Slot(fn)
        slot.loop = loop
        future = slot.future = loop.create_future()
        with self._lock:
            if self._closed:
                raise JournalClosed("the journal is closed")
            self._carry_parked()
            self._pending.append(slot)
            if self._leader is None:
                self._leader = _WRITER
                self._start_writer_thread()
                self._writer_turn.notify()
        return await future  # type: ignore[no-any-return]

    def defer(self, fn: Callable[[Any], Any], on_done: OnDone, within: float | None = None) -> None:
        """Hand ``fn(tx)`` over without waiting: it commits with the next write submitted,
        or on its own within ``within`` seconds (None: ``defer_seconds``), or with an
        earlier-due parked write; ``on_done(value, error)`` gets its outcome."""
        slot = _Slot(fn, on_done)
        slot.deadline = time.monotonic() + (self.defer_seconds if within is None else within)
        with self._lock:
            if self._running == threading.get_ident():
                raise RuntimeError("a journal write may not start another write")
            if self._closed:
                raise JournalClosed("the journal is closed")
            self._parked.append(slot)
            self._unsettled += 1
            due = self._timer_due
            if due is None or due > slot.deadline:  # the writer thread must wake sooner
                self._start_writer_thread()
                self._writer_turn.notify()

    def flush(self) -> None:
        """Return once every deferred write handed over so far is answered."""
        if self._unsettled:
            self.submit(_nothing)  # FIFO: answered after everything queued before it

    async def flush_async(self) -> None:
        if self._unsettled:
            await self.submit_async(_nothing)

    # leading
    def _lead(self, own: _Slot | None) -> None:
        """Run batches until ``own`` is answered (the writer thread: until none is queued),
        then pass the leadership on."""
        while True:
            with self._lock:
                batch = self._pending[:MAX_BATCH]
                del self._pending[:MAX_BATCH]
                self._running = threading.get_ident()
            self._batches.commit(batch)  # answers every slot; raises nothing
            self._report_deferred(batch)
            with self._lock:
                self._running = None
                by_loop = self._wake_threads(batch, own)
                done = own.done if own is not None else not self._pending
                if done:
                    self._pass_leadership()
            for loop, slots in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_resolve, slots)
                except RuntimeError:  # the loop was closed meanwhile: nobody waits any more
                    pass
            if done:
                return

    def _wake_threads(
        self, batch: list[_Slot], own: _Slot | None
    ) -> dict[asyncio.AbstractEventLoop, list[_Slot]]:
        """Under the lock: wake each answered thread once; the loops' slots, to answer."""
        by_loop: dict[asyncio.AbstractEventLoop, list[_Slot]] = {}
        woken = 0
        for slot in batch:
            slot.done = True
            if slot.on_done is not None:  # deferred: nobody waits
                self._unsettled -= 1
            elif slot.loop is not None:
                by_loop.setdefault(slot.loop, []).append(slot)
            elif slot is not own:
                slot.wake.release()
                woken += 1
        self.wakeups += woken
        return by_loop

    def _pass_leadership(self) -> None:
        """Under the lock: the first queued thread leads next, else the writer thread."""
        for slot in self._pending:
            if slot.wake is not None:
                self._leader = id(slot)
                slot.lead = True
                slot.wake.release()
                self.wakeups += 1
                return
        if self._pending:
            self._leader = _WRITER
            self._start_writer_thread()
            self._writer_turn.notify()
            self.wakeups += 1
            return
        self._leader = None
        self._idle.notify_all()

    def _start_writer_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._writer_loop, name=self.name, daemon=True)
            self._thread.start()

    def _writer_loop(self) -> None:
        while True:
            with self._lock:
                while self._leader != _WRITER:
                    if self._closed and self._leader is None and not self._parked:
                        return  # closed and idle
                    if not self._parked:
                        self._timer_due = None
                        self._writer_turn.wait()
                        continue
                    due = min(slot.deadline for slot in self._parked)  # the soonest
                    wait = due - time.monotonic()
                    if wait > 0 and not self._closed:
                        self._timer_due = due
                        self._writer_turn.wait(wait)
                        continue
                    self._timer_due = None
                    self.deferred_alone += len(self._parked)
                    self._carry_parked()  # nothing came to ride on: commit them now
                    if self._leader is None:
                        self._leader = _WRITER
                    # else the running leader passes the lead on to whoever is queued
                self._timer_due = None
            self._lead(None)

    def close(self) -> None:
        """Refuse new writes; commit what is parked; wait until every write is answered."""
        with self._lock:
            self._closed = True
            if self._parked:  # the writer thread commits them at once (closed)
                self._start_writer_thread()
                self._writer_turn.notify()
            while self._leader is not None or self._pending or self._parked:
                self._idle.wait()
            self._writer_turn.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10)

    def _report_deferred(self, batch: list[_Slot]) -> None:
        """Each deferred write's outcome to its ``on_done`` (which must not raise)."""
        for slot in batch:
            if slot.on_done is not None:
                try:
                    slot.on_done(slot.value, slot.error)
                except Exception:  # a broken callback must not stop the writer
                    pass
