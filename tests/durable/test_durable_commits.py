"""How many transactions a journaled turn costs: with deferred writes, a safe-replay tool's
result and every checkpoint ride on the run's next write (docs/durability-loop.md)."""

from __future__ import annotations

import pytest

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
    assert deferred == 9, deferred
    assert at_once == 13, at_once  # the run's end and its answer: one write
