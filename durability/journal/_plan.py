"""What a journal operation hands to its executor: a transaction function and its rules.

Each journal operation builds a Plan (checking and masking its arguments, which needs no
database) and the facade executes it: ``Journal`` in the caller's thread, ``AsyncJournal``
from an event loop (durability/journal/_operation.py derives both methods from the one
builder). Building and executing are apart so both facades share every rule and the
asynchronous one can prepare a light call on the loop and hand only the transaction to
the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from durability.store.base import StoreTx, operation_name

__all__ = ["Plan", "deferred", "operation_name", "read", "run_write", "write"]

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
    #: A deferrable write (``@deferrable``): the run it rides on, or None to commit now.
    defer_to: str | None = None
    #: How long the deferred write may wait for a write to ride on (None: the journal's
    #: ``defer_seconds``).
    defer_within: float | None = None


def deferred(plan: Plan[T], run_id: str | None, within: float | None = None) -> Plan[T]:
    """``plan`` handed to the run's deferred writes (None: committed at once), to wait
    at most ``within`` seconds for a write to ride on (None: the journal's bound)."""
    plan.defer_to = run_id
    plan.defer_within = within
    return plan


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
