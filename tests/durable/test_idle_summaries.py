"""Idle chats read after start-up (issue #24, round 4): start-up rebuilds the chats with an
open run and leaves the summaries of the idle ones to a thread of their own, so the server
answers before they are read; whatever needs them (a request naming a chat, the chat list,
a new chat's default name) waits for that read, and a read that fails is tried again."""

from __future__ import annotations

import asyncio
import threading

import pytest

from python.durable import rebuild
from tests.durable.conftest import TIMEOUT

pytestmark = pytest.mark.unit


async def _finished_chats(harness, count: int) -> list[str]:
    ids = []
    for n in range(count):
        harness.model.tool("response", {"text": f"answer number {n}"})
        ctx = harness.chat()
        assert await harness.send(ctx, f"question number {n}") == f"answer number {n}"
        ids.append(ctx.id)
    return ids


async def _reopen(harness) -> None:
    """A new process on the same journal (no chat loaded yet)."""
    await harness.chats.close()
    harness.chats = harness._open()


def _gated(monkeypatch, fail_first: bool = False) -> tuple[threading.Event, list[str]]:
    """The idle chats' read waits for the returned event (and, with ``fail_first``, its first
    attempt fails); the list records each attempt's thread."""
    gate = threading.Event()
    attempts: list[str] = []
    read = rebuild.idle_chats

    def gated(journal, busy):
        attempts.append(threading.current_thread().name)
        assert gate.wait(TIMEOUT), "the test never opened the gate"
        if fail_first and len(attempts) == 1:
            raise OSError("the disk hiccuped")
        return read(journal, busy)

    monkeypatch.setattr(rebuild, "idle_chats", gated)
    return gate, attempts


async def test_start_up_does_not_wait_for_the_idle_chats_and_a_named_chat_waits(
    harness, monkeypatch
):
    chats = await _finished_chats(harness, 3)
    await _reopen(harness)
    gate, attempts = _gated(monkeypatch)
    # start-up returns while the idle chats' read is held (before: it read them first, and
    # this would wait until the deadline)
    restored = await asyncio.wait_for(
        asyncio.to_thread(rebuild.restore_contexts, harness.chats, idle_later=True), TIMEOUT
    )
    assert restored == [] and attempts == ["idle-chats"]
    # a request naming an idle chat waits for the read, then gets the chat rebuilt
    loading = asyncio.ensure_future(harness.chats.load(chats[1]))
    listing = asyncio.ensure_future(asyncio.to_thread(harness.chats.idle))
    done, _ = await asyncio.wait({loading, listing}, timeout=0.2)
    assert not done, "nothing that needs the idle chats answers before they are read"
    gate.set()
    loaded = await asyncio.wait_for(loading, TIMEOUT)
    assert loaded is not None and loaded.id == chats[1]
    assert "question number 1" in loaded.agent0.history.output_text()
    listed = await asyncio.wait_for(listing, TIMEOUT)  # read while chats[1] was rebuilt
    assert {c for c, _ in listed} - {chats[1]} == {chats[0], chats[2]}, listed
    assert {c for c, _ in harness.chats.idle()} == {chats[0], chats[2]}
    names = {idle.name for _, idle in listed}
    # a new chat's default name counts the idle chats too (never one of theirs)
    assert harness.chats.next_chat_names(1)[0] not in names | {loaded.name}


async def test_a_failed_read_of_the_idle_chats_is_tried_again(harness, monkeypatch):
    chats = await _finished_chats(harness, 2)
    await _reopen(harness)
    gate, attempts = _gated(monkeypatch, fail_first=True)
    rebuild.restore_contexts(harness.chats, idle_later=True)
    gate.set()
    # the first attempt failed; the chat list reads them again rather than lose them
    await harness.chats.settled()
    assert len(attempts) == 2, attempts
    assert {c for c, _ in harness.chats.idle()} == set(chats)
    assert await harness.chats.load(chats[0]) is not None
