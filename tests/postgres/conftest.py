"""Fixtures for the shared-worker tests: journals of named workers on the test's schema."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator

import pytest

from durability import Journal


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def wait_for(predicate: Callable[[], object], timeout: float = 20.0, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy, within a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def open_journal(postgres_server, pg_namespace) -> Iterator[Callable[..., Journal]]:
    """``open_journal(worker_id=None, lease_seconds=30, **kw)``: a journal on the test's
    schema; with a worker id it is that worker's (claims, fencing). Closed afterwards."""
    opened: list[Journal] = []

    def make(worker_id: str | None = None, lease_seconds: float = 30.0, **kwargs) -> Journal:
        kwargs.setdefault("pool_size", 4)
        journal = Journal.open_postgres(
            postgres_server.dsn,
            namespace=pg_namespace,
            worker_id=worker_id,
            lease_seconds=lease_seconds,
            **kwargs,
        )
        opened.append(journal)
        return journal

    yield make
    for journal in opened:
        journal.close()
