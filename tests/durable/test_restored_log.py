"""The whole story after a restart (issue #11, point 2): the log items of the calls journaled
after the latest checkpoint are rebuilt from the journal, marked restored, the uncertain
call marked as such, and a resumed run shows every call once."""

from __future__ import annotations

import sqlite3
from collections import Counter
from contextlib import closing

import pytest

from durability.records import DecisionRequest
from python.durable import decisions
from python.helpers import files
from tests.durable.conftest import side_effects

pytestmark = pytest.mark.unit

SECRET = "tok-5b7d1e0c9a8f"


def _script(model, *, secret: str = "") -> None:
    model.tool("side_effect", {"label": "one"}, headline="first step")
    model.tool("side_effect", {"label": "two", "token": secret}, headline="second step")
    model.tool("response", {"text": "all done"}, headline="answering")


def _items(harness, ctx_id: str) -> list[dict]:
    return harness.get(ctx_id).log.output()


def _by_heading(items: list[dict], text: str) -> list[dict]:
    return [i for i in items if text in i["heading"]]


def _tool_items(items: list[dict], label: str) -> list[dict]:
    return [i for i in items if i["type"] == "tool" and i["kvps"].get("label") == label]


def _assert_each_call_once(harness, run_id: str, items: list[dict]) -> None:
    """Every shown call (not a superseded attempt, not a utility call) has one item."""
    shown = Counter(i["call_id"] for i in items if i.get("call_id"))
    calls = [c for c in harness.journal.list_calls(run_id) if c.state != "superseded"]
    assert calls, "the run made calls"
    for call in calls:
        assert shown[call.id] == 1, (call.name, call.seq, call.state, shown)
    assert set(shown) <= {c.id for c in calls}


async def _crash_at_second_side_effect(harness, monkeypatch, secret: str = ""):
    _script(harness.model, secret=secret)
    ctx = harness.chat()
    ctx.log.log(type="user", heading="User message", content="do both steps")
    await harness.crash(ctx, "do both steps", monkeypatch, "after_intent@2", "side_effect")
    plans = await harness.restart()
    assert [p.action for p in plans] == ["hold"]
    return ctx.id, harness.run_of(ctx.id)


async def test_a_held_chat_shows_the_calls_after_its_checkpoint_and_marks_the_uncertain_one(
    harness, monkeypatch
):
    ctx_id, run = await _crash_at_second_side_effect(harness, monkeypatch)
    items = _items(harness, ctx_id)

    # before the checkpoint: shown as the checkpoint kept them (live, named by their call)
    first = _by_heading(items, "A0: first step")
    assert len(first) == 1 and "restored" not in first[0] and first[0]["call_id"]
    [one] = _tool_items(items, "one")
    assert one["content"] == "side effect one done" and "restored" not in one
    # after it: the model's reply rebuilt from its committed result, marked restored
    [second] = _by_heading(items, "A0: second step")
    assert second["type"] == "agent" and second["restored"] == "journal"
    assert second["kvps"]["tool_name"] == "side_effect"
    assert second["kvps"]["tool_args"]["label"] == "two"
    # the call whose outcome is unknown: its arguments, no output, marked uncertain
    [two] = _tool_items(items, "two")
    assert two["restored"] == "uncertain" and two["content"] == ""
    assert two["heading"] == "A0: Using tool 'side_effect'"
    calls = {c.id: c for c in harness.journal.list_calls(run.id)}
    assert (calls[second["call_id"]].kind, calls[second["call_id"]].state) == ("model", "completed")
    assert (calls[two["call_id"]].name, calls[two["call_id"]].state) == ("side_effect", "open")
    assert items.index(second) < items.index(two) < len(items) - 1
    assert items[-1]["type"] == "warning" and "uncertain_call" in items[-1]["content"]
    _assert_each_call_once(harness, run.id, items)


async def test_the_checkpoint_alone_lacks_the_steps_after_it(harness, monkeypatch):
    """What the checkpoint alone projects: no item for the second step (the fix adds it)."""
    ctx_id, _run = await _crash_at_second_side_effect(harness, monkeypatch)
    latest = harness.journal.latest_context_checkpoint(ctx_id)
    checkpointed = latest.histories["log"]
    assert not _by_heading(checkpointed, "second step")
    assert _by_heading(_items(harness, ctx_id), "second step")


@pytest.mark.parametrize("decision", ["resume", "confirmed_completed", "new_attempt"])
async def test_after_a_decision_every_call_is_shown_once(harness, monkeypatch, decision):
    ctx_id, run = await _crash_at_second_side_effect(harness, monkeypatch)
    note = "checked: it happened" if decision == "confirmed_completed" else None
    await decisions.apply_decision(
        harness.chats,
        DecisionRequest(run.id, decision, version=run.version, actor="tester", note=note),
    )
    assert await harness.settle(ctx_id) == "all done"
    items = _items(harness, ctx_id)
    _assert_each_call_once(harness, run.id, items)
    assert len(_by_heading(items, "A0: second step")) == 1
    assert len([i for i in items if i["type"] == "response"]) == 1
    # the replayed reply came from the journal; the answer after it was made live
    [second] = _by_heading(items, "A0: second step")
    assert second["restored"] == "journal"
    [answer] = [i for i in items if i["type"] == "response"]
    assert answer["content"] == "all done" and "restored" not in answer
    two = _tool_items(items, "two")
    assert len(two) == 1
    if decision == "new_attempt":  # it ran for real now
        assert "restored" not in two[0] and side_effects() == ["one", "two"]
    else:  # the journal holds the outcome: abandoned, or the person's note
        assert two[0]["restored"] == "journal" and side_effects() == ["one"]


async def test_an_automatic_resume_shows_every_call_once(harness, monkeypatch):
    _script(harness.model)
    ctx = harness.chat()
    await harness.crash(ctx, "do both steps", monkeypatch, "after_result@2", "side_effect")
    plans = await harness.restart()
    assert [p.action for p in plans] == ["resume"]
    assert await harness.settle(ctx.id) == "all done"
    run = harness.run_of(ctx.id)
    items = _items(harness, ctx.id)
    _assert_each_call_once(harness, run.id, items)
    [two] = _tool_items(items, "two")
    assert two["restored"] == "journal" and two["content"] == "side effect two done"
    assert side_effects() == ["one", "two"]


async def test_restored_items_keep_secrets_masked(harness, monkeypatch):
    (files.usr_dir() / "secrets.env").write_text(f"PAY_TOKEN={SECRET}\n", encoding="utf-8")
    ctx_id, _run = await _crash_at_second_side_effect(harness, monkeypatch, secret=SECRET)
    items = _items(harness, ctx_id)
    assert SECRET not in repr(items)
    [second] = _by_heading(items, "A0: second step")
    assert second["kvps"]["tool_args"]["token"] == "§§secret(PAY_TOKEN)"
    [two] = _tool_items(items, "two")
    assert two["kvps"]["token"] == "§§secret(PAY_TOKEN)"


async def test_restored_marks_survive_the_next_checkpoint(harness, monkeypatch):
    """The flags are part of the checkpointed log: a second restart still shows them."""
    ctx_id, run = await _crash_at_second_side_effect(harness, monkeypatch)
    await decisions.apply_decision(
        harness.chats, DecisionRequest(run.id, "resume", version=run.version, actor="tester")
    )
    await harness.settle(ctx_id)
    before = [(i["heading"], i.get("restored"), i.get("call_id")) for i in _items(harness, ctx_id)]
    await harness.restart()
    after = [(i["heading"], i.get("restored"), i.get("call_id")) for i in _items(harness, ctx_id)]
    assert [a for a in after if a[1]] == [b for b in before if b[1]]
    assert any(a[1] == "journal" for a in after)


def test_a_rebuild_reads_the_current_chains_not_a_runs_resume_base():
    from python.durable import checkpoint

    assert checkpoint.current_chains("agent:0") and checkpoint.current_chains("log")
    assert not checkpoint.current_chains(checkpoint.RESUME_PREFIX + "agent:0")


async def test_a_damaged_call_is_shown_as_damaged_never_its_stored_value(harness, monkeypatch):
    """Issue #17, point 11: the open call's arguments were changed on disk between the two
    lives; recovery holds the run (corrupt_record) and the rebuilt chat shows the step as a
    damaged record, not the changed arguments."""
    _script(harness.model)
    ctx = harness.chat()
    await harness.crash(ctx, "do both steps", monkeypatch, "after_intent@2", "side_effect")
    (open_call,) = [
        c for c in harness.journal.list_calls(harness.run_of(ctx.id).id) if c.state == "open"
    ]
    forged = '{"args":{"label":"forged label"},"method":null}'
    with closing(sqlite3.connect(harness.db)) as conn, conn:
        conn.execute("UPDATE calls SET args = ? WHERE id = ?", (forged, open_call.id))
    await harness.restart()
    run = harness.run_of(ctx.id)
    assert (run.status, run.reason) == ("needs_attention", "corrupt_record")
    items = _items(harness, ctx.id)
    text = repr(items)
    assert "forged label" not in text
    (shown,) = [i for i in items if i.get("call_id") == open_call.id]
    assert shown["type"] == "warning" and shown["kvps"]["record"] == "call_args"
    assert shown["content"].startswith("[damaged record: digest mismatch] call_args of call")
    assert _tool_items(items, "one"), "the intact step before it is still shown"
