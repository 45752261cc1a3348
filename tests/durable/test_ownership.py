"""The ownership strategy: with SQLite this process owns every run, so every question the
session, the driver and the decisions ask has the local answer (python/durable/ownership.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from durability import Journal
from python.durable import DurableChats
from python.durable.ownership import LocalOwnership, Ownership
from python.durable.shared import SharedWorker

pytestmark = pytest.mark.unit


@pytest.fixture
def chats(tmp_path: Path):
    journal = Journal.open_sqlite(tmp_path / "journal.sqlite")
    made = DurableChats(journal)
    try:
        yield made
    finally:
        journal.close()


def test_sqlite_chats_own_every_run(chats: DurableChats) -> None:
    ownership = chats.ownership
    assert isinstance(ownership, LocalOwnership)
    assert isinstance(ownership, Ownership)
    assert ownership.others_may_run is False
    assert chats.keeps_open("run-1") is False  # a cancelled run ends (stop decision)

    async def ask() -> tuple[bool, object]:
        await ownership.gate(None)  # type: ignore[arg-type]  # every effect may start
        return await ownership.take("run-1"), await ownership.named_chat("c1", None)

    assert asyncio.run(ask()) == (True, None)


def test_shutdown_keeps_runs_open_whatever_the_ownership(chats: DurableChats) -> None:
    chats.begin_shutdown()
    assert chats.keeps_open("run-1") is True


def test_a_shared_worker_is_an_ownership() -> None:
    assert SharedWorker.others_may_run is True
    members = [m for m in dir(LocalOwnership) if not m.startswith("_") and m != "chats"]
    assert all(hasattr(SharedWorker, m) for m in members), members
