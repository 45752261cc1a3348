"""Group commit of a shared worker's fenced writes on PostgreSQL (#24).

Concurrent fenced writes (each a ``FencedOp``: one run's write behind that run's claim)
queue in a ``GroupCommitWriter`` (durability/store/_group_commit.py); one leader at a time
runs the queued writes of many runs in one transaction and one COMMIT. Inside it:

- the fences of every write are locked and read in one statement, rows in id order (so
  two batches lock their runs in the same order), queued with BEGIN in pipeline mode;
- each write's fence is verified first: a refused fence fails only that write, whose
  operation never runs (nothing of it exists to roll back);
- the operations run one after another with no savepoints. If one is refused (a
  ``DurabilityError`` that keeps no writes) or fails, the transaction is rolled back and
  run again with each operation in its own SAVEPOINT, so a refusal rolls back only its
  own write. A refusal that keeps its writes (a run held) is committed with the rest.

The transaction is the store's (``PostgresStore.run``): a deadlock, a serialisation
failure or a unique violation runs the whole batch again; a connection lost before COMMIT
runs it again on a new connection; a lost COMMIT acknowledgement is settled by the
transaction's id, and the outcomes the committed transaction computed are the answers.
A lone write does not come here: it takes the store's single-write path, where the fence
rides in the operation's first round trip.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from durability.errors import DurabilityError
from durability.store._batch import Slot
from durability.store._group_commit import GroupCommitWriter
from durability.store.base import FencedOp

#: The fences of a batch, locked in run id order: the runs named, and the runs of the calls
#: named (with each such call's id).
_FENCES = (
    "SELECT r.id, r.fence, c.id FROM runs r LEFT JOIN calls c ON c.id = ANY(%s::text[])"
    " AND c.run_id = r.id WHERE r.id = ANY(%s::text[] || ARRAY(SELECT run_id FROM calls"
    " WHERE id = ANY(%s::text[]))) ORDER BY r.id FOR NO KEY UPDATE OF r"
)

Outcome = tuple[bool, Any, bool]  # (succeeded, value or error, keeps writes)


class _Isolate(Exception):
    """Internal: a write was refused or failed; run the batch again with savepoints."""


class _NothingKept(Exception):
    """Internal: every write was refused; roll back, and these are the answers."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        super().__init__("nothing to commit")
        self.outcomes = outcomes


class PostgresBatches:
    """The ``Batches`` of a PostgreSQL group-commit writer: runs a batch through
    ``run_write(body)`` (the store's retried, settled write transaction), a lone write
    through ``single(fenced)`` (the store's single-write path)."""

    def __init__(
        self,
        run_write: Callable[[Callable[..., Any]], Any],
        single: Callable[[FencedOp[Any]], Any],
        tx: Callable[[Any, Any], Any],
        translate: Callable[[BaseException], BaseException],
    ) -> None:
        self.run_write, self.single, self.tx, self.translate = run_write, single, tx, translate
        self.committed = 0  # committed transactions, for tests and measurements
        self.retried = 0  # batches run again with savepoints after a refusal

    def commit(self, batch: Sequence[Slot]) -> None:
        """Run ``batch`` in one transaction; each slot gets its outcome (raises nothing)."""
        if len(batch) == 1:
            slot = batch[0]
            try:
                slot.value, slot.error = self.single(slot.fn), None  # type: ignore[arg-type]
            except BaseException as exc:
                slot.value, slot.error = None, exc
            return
        outcomes: list[Outcome]
        try:
            try:
                outcomes = self.run_write(self._body(batch, isolated=False))
            except _Isolate:
                self.retried += 1
                outcomes = self.run_write(self._body(batch, isolated=True))
            self.committed += 1
        except _NothingKept as nothing:
            outcomes = nothing.outcomes
        except BaseException as exc:  # the transaction failed: every write fails with it
            error = self.translate(exc)
            outcomes = [(False, error, False)] * len(batch)
        for slot, (ok, value, _) in zip(batch, outcomes, strict=True):
            slot.value, slot.error = (value, None) if ok else (None, value)

    def _body(self, batch: Sequence[Slot], *, isolated: bool) -> Callable[..., list[Outcome]]:
        ops: list[FencedOp[Any]] = [slot.fn for slot in batch]  # type: ignore[misc]

        def body(conn: psycopg.Connection[Any], pipeline: Any, opened: Any) -> list[Outcome]:
            fences, runs_of_calls = _fences(conn, ops)
            tx = self.tx(conn, pipeline)
            outcomes: list[Outcome] = []
            for n, fenced in enumerate(ops):
                run_id = fenced.run_id or runs_of_calls.get(fenced.call_id or "")
                try:
                    fenced.verify(None if run_id is None else fences.get(run_id))
                except DurabilityError as exc:  # a refused fence: its operation never runs
                    outcomes.append((False, exc, False))
                    continue
                if isolated:
                    outcomes.append(self._isolated(conn, pipeline, tx, fenced, n))
                else:
                    outcomes.append(self._plain(tx, fenced))
            if not any(keep for _, _, keep in outcomes):
                raise _NothingKept(outcomes)
            return outcomes

        return body

    def _plain(self, tx: Any, fenced: FencedOp[Any]) -> Outcome:
        try:
            return True, fenced.op(tx), True
        except DurabilityError as exc:
            if not exc.keeps_writes:
                raise _Isolate() from None
            return False, exc, True
        except psycopg.Error as exc:
            if _retried_by_store(exc):
                raise  # the store runs the whole transaction again, or settles it
            raise _Isolate() from None
        except Exception:
            raise _Isolate() from None

    def _isolated(
        self, conn: Any, pipeline: Any, tx: Any, fenced: FencedOp[Any], n: int
    ) -> Outcome:
        conn.execute(f"SAVEPOINT w{n}", prepare=False)
        try:
            value = fenced.op(tx)
        except DurabilityError as exc:
            if exc.keeps_writes:
                conn.execute(f"RELEASE SAVEPOINT w{n}", prepare=False)
            else:
                conn.execute(f"ROLLBACK TO SAVEPOINT w{n}", prepare=False)
            return False, exc, exc.keeps_writes
        except Exception as exc:
            if isinstance(exc, psycopg.Error) and _retried_by_store(exc):
                raise
            _sync_after_error(pipeline)
            conn.execute(f"ROLLBACK TO SAVEPOINT w{n}", prepare=False)
            return False, self.translate(exc), False
        conn.execute(f"RELEASE SAVEPOINT w{n}", prepare=False)
        return True, value, True


def _fences(conn: Any, ops: Sequence[FencedOp[Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every fence of the batch, locked: run id -> (run id, token); call id -> run id."""
    run_ids = sorted({op.run_id for op in ops if op.run_id is not None})
    call_ids = sorted({op.call_id for op in ops if op.run_id is None and op.call_id is not None})
    fences: dict[str, Any] = {}
    runs_of_calls: dict[str, str] = {}
    for run_id, token, call_id in conn.execute(_FENCES, (call_ids, run_ids, call_ids)):
        fences[str(run_id)] = (str(run_id), token)
        if call_id is not None:
            runs_of_calls[str(call_id)] = str(run_id)
    return fences, runs_of_calls


def _retried_by_store(exc: psycopg.Error) -> bool:
    """A failure the store answers by running the whole transaction again, or by settling
    it (a deadlock, a serialisation failure, a unique violation, a lost connection)."""
    from durability.store import _lost_commit

    state = exc.sqlstate or ""
    return state in ("40001", "40P01", "23505") or _lost_commit.is_connection_error(exc)


def _sync_after_error(pipeline: Any) -> None:
    """After an error fetched (not synced) in pipeline mode, the pipeline takes commands
    again only after a sync."""
    try:
        pipeline.sync()
    except psycopg.Error:
        pass


class FencedWriter(GroupCommitWriter):
    """A ``GroupCommitWriter`` whose batches are PostgreSQL transactions of fenced writes."""

    def __init__(self, batches: PostgresBatches, name: str) -> None:
        super().__init__(control=None, tx=None, translate=batches.translate, name=name)  # type: ignore[arg-type]
        self._batches = batches  # type: ignore[assignment]


class FencedWriters:
    """``lanes`` group-commit writers, each with a transaction in flight of its own; a
    write goes to the lane of its run (or call), so batches of different lanes overlap
    their round trips while each batch still carries many runs' writes."""

    def __init__(self, store: Any, lanes: int) -> None:
        self.lanes = [_writer(store, n) for n in range(max(1, lanes))]

    def submit(self, fenced: FencedOp[Any]) -> Any:
        key = (fenced.run_id or fenced.call_id or "").encode("utf-8", "surrogatepass")
        return self.lanes[zlib.crc32(key) % len(self.lanes)].submit(fenced)

    @property
    def batches(self) -> int:
        return sum(lane.batches for lane in self.lanes)

    @property
    def retried_batches(self) -> int:
        return sum(lane.retried_batches for lane in self.lanes)

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()


def _writer(store: Any, n: int) -> FencedWriter:
    """Lane ``n`` of ``store`` (a ``PostgresStore``)."""
    batches = PostgresBatches(
        run_write=lambda body: store.run("write", body, name="group commit"),
        single=store.write_alone,
        tx=lambda conn, pipeline: store._tx(conn, locking=True, pipeline=pipeline),
        translate=store.translate,
    )
    return FencedWriter(batches, name=f"journal-writer:{store.namespace}:{n}")
