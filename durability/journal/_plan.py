"""What a journal operation hands to its executor: a transaction function and its rules.

Each public method of the journal builds a Plan (checking and masking its arguments, which
needs no database) and executes it: ``Journal`` in the caller's thread, ``AsyncJournal``
from an event loop (durability/journal/_async.py). Building and executing are apart so
both facades share every rule and the asynchronous one can prepare a light call on the
loop and hand only the transaction to the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from durability.store.base import StoreTx

T = TypeVar("T")


@dataclass(slots=True)
class Plan(Generic[T]):
    """``op`` runs in one transaction (a backend may run it again from the start: it must
    only read and write through ``tx`` and reset what it collects)."""

    op: Callable[[StoreTx], T]
    #: False: a read (one consistent snapshot); True: a write, returned once durable.
    write: bool = True
    #: Shared workers: the write is fenced by this worker's claim on the run named here,
    #: or on the run of the call named here (durability/cluster.py).
    fenced: bool = False
    run_id: str | None = None
    call_id: str | None = None
    #: Run in the caller once the transaction committed (e.g. the history cache updated).
    after: Callable[[T], T] | None = None


def operation_name(op: Callable[..., object]) -> str:
    """The journal operation a transaction belongs to (``commit_result.<locals>.op`` gives
    ``commit_result``), for the line that says a fenced write was refused."""
    return op.__qualname__.split(".<locals>", 1)[0].rsplit(".", 1)[-1]


def read(op: Callable[[StoreTx], T], after: Callable[[T], T] | None = None) -> Plan[T]:
    return Plan(op, write=False, after=after)


def write(op: Callable[[StoreTx], T], after: Callable[[T], T] | None = None) -> Plan[T]:
    return Plan(op, after=after)


def run_write(
    op: Callable[[StoreTx], T],
    *,
    run_id: str | None = None,
    call_id: str | None = None,
    after: Callable[[T], T] | None = None,
) -> Plan[T]:
    """A write for one run: fenced by this worker's claim when the journal has a cluster."""
    return Plan(op, fenced=True, run_id=run_id, call_id=call_id, after=after)
