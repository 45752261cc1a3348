"""How many transactions a journaled turn costs: with deferred writes, a safe-replay tool's
result and every checkpoint ride on the run's next write (docs/durability-loop.md)."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from python.durable import checkpoint
from tests.durable.conftest import prompt_text

pytestmark = pytest.mark.unit


async def _turn_transactions(harness, label: str) -> tuple[int, list[str]]:
    harness.model.tool("side_effect", {"label": label})
    harness.model.tool("response", {"text": f"done {label}"})
    ctx = harness.chat()
    before = harness.journal.store.batches
    assert await harness.send(ctx, f"do {label}") == f"done {label}"
    harness.journal.flush()
    run = harness.run_of(ctx.id)
    states = [c.state for c in harness.journal.list_calls(run.id)]
    return harness.journal.store.batches - before, states


async def test_results_of_safe_tools_and_checkpoints_ride_on_the_next_write(harness):
    journal = harness.journal
    journal.store.defer_seconds = 60.0  # nothing commits alone: the count is exact
    journal.deferrals.enabled = False  # every write at once, as before deferral
    at_once, states = await _turn_transactions(harness, "one")
    assert states == ["completed"] * 4
    journal.deferrals.enabled = True
    deferred, states = await _turn_transactions(harness, "two")
    assert states == ["completed"] * 4
    assert journal.store.deferred_alone == 0
    # deferred: the base checkpoint (rides on the first model intent), the first
    # iteration's checkpoint (on the second model intent), and the response's result and
    # the last checkpoint (both on the run's end); the side effect's and the model's
    # results are awaited as before
    assert at_once - deferred == 4, (at_once, deferred)
    # admission; three intents and two awaited results; the response's intent; the run's
    # end with its answer event (one write, #24), carrying the response's result and the
    # last checkpoint
    assert deferred == 9, deferred  # unchanged by the start checkpoint's own bound (#24):
    # at 60 s here every deferred write waits for the next; on the server (5 ms) the start
    # checkpoint no longer commits alone (test below)
    assert at_once == 13, at_once  # the run's end and its answer: one write


async def test_the_start_checkpoint_waits_longer_for_the_first_intent(harness, monkeypatch):
    """The run's start checkpoint is handed over with its own bound (prompt building comes
    before the first intent and outlasts the journal's 5 ms on a busy machine), every
    other deferred write with the journal's."""
    store = harness.journal.store
    bounds: list[float | None] = []
    real_defer = store.defer

    def spy(fn, on_done, within=None):
        bounds.append(within)
        real_defer(fn, on_done, within)

    monkeypatch.setattr(store, "defer", spy)
    harness.model.tool("response", {"text": "hi"})
    assert await harness.send(harness.chat(), "hello") == "hi"
    assert bounds[0] == checkpoint.START_WITHIN_SECONDS
    assert bounds[1:] and set(bounds[1:]) == {None}


async def test_a_lost_start_checkpoint_resumes_from_the_chat_and_the_input(harness, monkeypatch):
    """A crash before the run's first intent may lose its start checkpoint (it waits for
    that intent to ride on): the run resumes from the chat's last checkpoint plus the
    journaled input, with the same history, and asks the model once."""
    harness.model.tool("response", {"text": "first answer"})
    ctx = harness.chat()
    assert await harness.send(ctx, "first question") == "first answer"
    harness.model.tool("response", {"text": "second answer"})
    await harness.crash(ctx, "second question", monkeypatch, "before_intent", "model")
    assert harness.model.calls == 1
    run_id = harness.run_of(ctx.id).id
    harness.journal.close()  # in-process, close commits the parked checkpoint: drop it
    with contextlib.closing(sqlite3.connect(harness.db)) as db:
        assert db.execute("DELETE FROM checkpoints WHERE run_id = ?", (run_id,)).rowcount == 1
        db.commit()
    await harness.restart()
    assert await harness.settle(ctx.id) == "second answer"
    run = harness.run_of(ctx.id)
    assert (run.id, run.status) == (run_id, "completed")
    assert harness.model.calls == 2, "the model is asked once for the resumed run"
    prompt = prompt_text(harness.model.requests[-1])
    assert prompt.count("first question") == 1 and prompt.count("first answer") == 1
    assert prompt.count("second question") == 1, prompt
    latest = harness.journal.latest_context_checkpoint(ctx.id)
    assert latest is not None and latest.run_id == run_id
