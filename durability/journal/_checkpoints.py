"""Checkpoints through the journal: written with a run's version bump, read back to
rebuild a chat or resume a run (the chain format lives in durability/checkpoints.py)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from durability import checkpoints
from durability._runs import load_run, require_active
from durability.canonical import canonical_json
from durability.errors import InvalidArgument
from durability.journal._operation import JournalBase, deferrable, operation
from durability.journal._plan import Plan, deferred, read, run_write
from durability.records import Checkpoint, CheckpointData, CheckpointRef
from durability.store.base import StoreTx

#: Which history chains a read loads: None (all), a collection of keys, or a predicate.
HistoryKeys = Collection[str] | Callable[[str], bool] | None


def checkpoint_op(
    journal: JournalBase,
    tx: StoreTx,
    run_id: str,
    context_id: str,
    data: CheckpointData,
    now: float,
) -> tuple[str, checkpoints.HistoryCacheEntry]:
    """Store one checkpoint in ``tx``; what to put in the history cache after commit."""
    _, entry = checkpoints.store_checkpoint(
        tx, journal.masker, journal.history_cache, run_id, context_id, data, now
    )
    return context_id, entry


def apply_cache(journal: JournalBase, updates: list[Any]) -> None:
    for context_id, entry in updates:
        journal.history_cache.put(context_id, entry)


class CheckpointOps:
    """Checkpoints: written with the run's version bump, read back to rebuild or resume."""

    @operation()
    def write_checkpoint(
        journal: JournalBase, run_id: str, data: CheckpointData
    ) -> Plan[CheckpointRef]:
        """Commit a masked projection of the agents' state (history stored as deltas)."""
        return _write_checkpoint(journal, run_id, data)

    @deferrable()
    def defer_checkpoint(
        journal: JournalBase, run_id: str, data: CheckpointData, *, within: float | None = None
    ) -> Plan[CheckpointRef]:
        """``write_checkpoint`` without waiting (True), or at once where the engine does not
        defer (False). ``within``: how long it may wait for a write to ride on before it
        commits on its own (None: the journal's ``defer_seconds``)."""
        plan = _write_checkpoint(journal, run_id, data)
        return deferred(plan, run_id if journal.deferrals.enabled else None, within)

    @operation()
    def latest_checkpoint(
        journal: JournalBase, run_id: str, *, histories: HistoryKeys = None
    ) -> Plan[Checkpoint | None]:
        """The run's newest checkpoint, validated (CorruptCheckpoint when damaged).

        ``histories`` (a collection of keys, or a predicate on a key) loads only those
        history chains; the others are left out of ``Checkpoint.histories``."""
        wanted = _key_filter(histories)

        def op(tx: StoreTx) -> Checkpoint | None:
            row = tx.checkpoints.latest(run_id=run_id)
            return checkpoints.load_checkpoint(tx, row, wanted) if row else None

        return read(op)

    @operation()
    def latest_context_checkpoint(
        journal: JournalBase, context_id: str, *, histories: HistoryKeys = None
    ) -> Plan[Checkpoint | None]:
        """The chat's newest checkpoint over all its runs (to rebuild the chat); with
        ``histories``, only those history chains (see ``latest_checkpoint``)."""
        wanted = _key_filter(histories)

        def op(tx: StoreTx) -> Checkpoint | None:
            row = tx.checkpoints.latest(context_id=context_id)
            return checkpoints.load_checkpoint(tx, row, wanted) if row else None

        return read(op)


def _write_checkpoint(
    journal: JournalBase, run_id: str, data: CheckpointData
) -> Plan[CheckpointRef]:
    if not isinstance(data, CheckpointData):
        raise InvalidArgument("data must be a CheckpointData", field="data")
    if not isinstance(data.state, dict) or not isinstance(data.histories, dict):
        raise InvalidArgument("state and histories must be dicts", field="data")
    canonical_json(data.state)  # histories are checked message by message when stored
    now = journal.clock()
    cache_update: list[Any] = []

    def op(tx: StoreTx) -> CheckpointRef:
        cache_update.clear()  # a backend may run op again (e.g. after a conflict)
        context_id = tx.runs.bump_active(run_id, now)
        if context_id is None:
            require_active(load_run(tx, run_id))  # raises the precise error
            raise AssertionError("unreachable: the run is active")
        ref, entry = checkpoints.store_checkpoint(
            tx, journal.masker, journal.history_cache, run_id, context_id, data, now
        )
        cache_update.append((context_id, entry))
        return ref

    def after(ref: CheckpointRef) -> CheckpointRef:
        apply_cache(journal, cache_update)
        return ref

    return run_write(op, run_id=run_id, after=after)


def _key_filter(keys: HistoryKeys) -> Callable[[str], bool] | None:
    if keys is None:
        return None
    if callable(keys):
        return keys
    if isinstance(keys, str):
        raise InvalidArgument(
            "histories must be a collection of keys, not one key", field="histories"
        )
    wanted = frozenset(keys)
    return wanted.__contains__
