"""A journaled turn: admission, intents and results at the two seams, checkpoints."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

import pytest

from agent import AgentContext, UserMessage
from durability import InputConflict, RunHeld
from python.durable import admission, decisions
from tests.durable.conftest import TIMEOUT, prompt_text, side_effects

pytestmark = pytest.mark.unit


async def test_a_journaled_turn_records_every_call_and_a_checkpoint_per_iteration(harness):
    harness.model.tool("side_effect", {"label": "one"})
    harness.model.tool("response", {"text": "all done"})
    ctx = harness.chat()
    assert await harness.send(ctx, "do it") == "all done"
    assert side_effects() == ["one"]
    run = harness.run_of(ctx.id)
    assert run.status == "completed"
    calls = harness.journal.list_calls(run.id)
    shape = [(c.agent_no, c.seq, c.kind, c.name, c.policy, c.state) for c in calls]
    assert shape == [
        (0, 0, "model", "model", "hold", "completed"),
        (0, 1, "tool", "side_effect", "hold", "completed"),
        (0, 2, "model", "model", "hold", "completed"),
        (0, 3, "tool", "response", "safe_replay", "completed"),
    ]
    assert calls[1].args == {"method": None, "args": {"label": "one"}}
    assert set(calls[0].args) == {"provider", "model", "kind", "messages_digest"}
    assert calls[3].result == {"message": "all done", "break_loop": True, "additional": None}
    assert admission.recorded_response(harness.journal, run.id) == "all done"
    checkpoint = harness.journal.latest_checkpoint(run.id)
    current = checkpoint.state["current"]
    assert current["seq"] == {"0": 4}
    assert [a["number"] for a in current["agents"]] == [0]
    history = checkpoint.histories["agent:0"]
    assert any("all done" in str(e.get("m", {}).get("content")) for e in history)
    # one base checkpoint at admission + one per iteration (two iterations)
    with contextlib.closing(sqlite3.connect(harness.db)) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM checkpoints WHERE run_id = ?", (run.id,)
        ).fetchone()
    assert count == 3


async def test_duplicate_input_returns_the_recorded_answer_without_a_model_call(harness):
    harness.model.tool("response", {"text": "first answer"})
    ctx = harness.chat()
    first = await harness.submit(ctx, UserMessage("question", id="input-1"))
    assert first.kind == "started" and first.input_id == "input-1"
    assert await asyncio.wait_for(first.task, TIMEOUT) == "first answer"
    calls = harness.model.calls
    again = await harness.submit(ctx, UserMessage("question", id="input-1"))
    assert (again.kind, again.run_id, again.status) == ("duplicate", first.run_id, "completed")
    assert again.response == "first answer" and again.task is None
    assert harness.model.calls == calls, "a duplicate input never calls the model"
    # communicate() follows the same rule
    assert await harness.send(ctx, "question", input_id="input-1") == "first answer"
    assert harness.model.calls == calls
    with pytest.raises(InputConflict) as err:
        await harness.submit(ctx, UserMessage("another question", id="input-1"))
    assert err.value.code == "input_conflict"
    assert len(harness.journal.list_runs(context_id=ctx.id)) == 1


async def test_generated_input_ids_and_attachment_digests(harness, tmp_path):
    attachment = tmp_path / "a.txt"
    attachment.write_text("v1")
    msg = UserMessage("look", attachments=[str(attachment)])
    payload = admission.input_payload(msg)
    before = admission.input_digest(harness.journal, payload)
    attachment.write_text("v2")
    after = admission.input_digest(harness.journal, admission.input_payload(msg))
    assert before != after, "the attachment's content is part of the digest"
    harness.model.tool("response", {"text": "ok"})
    ctx = harness.chat()
    submission = await harness.submit(ctx, msg)
    assert len(submission.input_id) == 32 and msg.id == submission.input_id
    await asyncio.wait_for(submission.task, TIMEOUT)


async def test_a_message_during_a_run_is_a_journaled_intervention(harness):
    harness.model.tool("wait", {"seconds": 60})
    harness.model.tool("response", {"text": "stopped waiting"})
    ctx = harness.chat()
    started = await harness.submit(ctx, UserMessage("wait a minute", id="in-a"))

    async def tool_logged() -> None:
        while not any("wait" in str(i.get("heading")) for i in ctx.log.output()):
            await asyncio.sleep(0.02)

    await asyncio.wait_for(tool_logged(), TIMEOUT)
    second = await harness.submit(ctx, UserMessage("answer now", id="in-b"))
    assert second.kind == "intervention" and second.run_id == started.run_id
    assert await asyncio.wait_for(started.task, TIMEOUT) == "stopped waiting"
    assert "answer now" in prompt_text(harness.model.requests[1])
    events = harness.journal.list_events(run_id=started.run_id)
    assert [e.type for e in events if e.type in ("input", "intervention")] == [
        "input",
        "intervention",
    ]
    wait_call = harness.journal.list_calls(started.run_id)[1]
    assert wait_call.name == "wait" and wait_call.result.get("interrupted") is True


async def test_a_failed_model_call_holds_until_a_retry_grant(harness):
    harness.model.fail(400, "bad request from provider")
    ctx = harness.chat()
    assert await harness.send(ctx, "go") == ""
    run = harness.run_of(ctx.id)
    assert (run.status, run.reason) == ("needs_attention", "model_failed")
    assert [c.state for c in harness.journal.list_calls(run.id)] == ["failed"]
    assert any(i["type"] == "warning" for i in ctx.log.output())
    with pytest.raises(RunHeld):
        await harness.submit(ctx, UserMessage("another"))
    harness.model.tool("response", {"text": "recovered"})
    await decisions.grant_retries(harness.chats, run.id, 1, actor="tester")
    assert await harness.settle(ctx.id) == "recovered"
    run = harness.journal.get_run(run.id)
    assert run.status == "completed"
    calls = harness.journal.list_calls(run.id)
    assert [(c.seq, c.attempt, c.state) for c in calls[:2]] == [
        (0, 1, "superseded"),
        (0, 2, "completed"),
    ]


async def test_a_deleted_chat_is_not_rebuilt_at_start_up(harness):
    harness.model.tool("response", {"text": "one"})
    harness.model.tool("response", {"text": "two"})
    kept, deleted = harness.chat(), harness.chat()
    assert await harness.send(kept, "hi") == "one"
    assert await harness.send(deleted, "hi") == "two"
    AgentContext.remove(deleted.id)

    async def removal_journaled() -> None:
        while not any(
            e.type == "context_removed" for e in harness.journal.list_events(context_id=deleted.id)
        ):
            await asyncio.sleep(0.02)

    await asyncio.wait_for(removal_journaled(), TIMEOUT)
    await harness.restart()
    assert [c.id for c in harness.chats.contexts()] == [kept.id]
    assert "hi" in harness.get(kept.id).agent0.history.output_text()


async def test_stop_ends_the_run_but_shutdown_leaves_it_for_recovery(harness):
    harness.model.tool("wait", {"seconds": 60})
    harness.model.tool("wait", {"seconds": 60})
    harness.model.tool("response", {"text": "resumed after shutdown"})
    first, second = harness.chat(), harness.chat()

    task = first.communicate(UserMessage("wait"))
    await _wait_tool_running(harness, first)
    first.kill_process()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, TIMEOUT)
    run = harness.run_of(first.id)
    assert run.status == "stopped"
    assert [c.state for c in harness.journal.list_calls(run.id)] == ["completed", "abandoned"]

    task = second.communicate(UserMessage("wait too"))
    await _wait_tool_running(harness, second)
    harness.chats.begin_shutdown()  # the process is stopping: its chats stop, runs stay
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, TIMEOUT)
    assert harness.run_of(second.id).status == "active"
    plans = await harness.restart()
    held = [p for p in plans if p.run.context_id == second.id]
    assert held[0].action == "hold", "the interrupted wait has no replay policy"


async def _wait_tool_running(harness, ctx) -> None:
    """Until the chat's wait tool has a durable intent: its effect is running."""

    def started() -> bool:
        runs = harness.journal.list_runs(context_id=ctx.id)
        return bool(runs) and any(
            c.name == "wait" for c in harness.journal.open_intents(runs[0].id)
        )

    async def poll() -> None:
        while not await asyncio.to_thread(started):
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), TIMEOUT)


async def test_nudge_stops_the_run_and_starts_a_new_one(harness):
    harness.model.tool("wait", {"seconds": 60})
    harness.model.tool("response", {"text": "nudged"})
    ctx = harness.chat()
    first = ctx.communicate(UserMessage("wait"))

    await _wait_tool_running(harness, ctx)
    second = ctx.nudge()
    assert await asyncio.wait_for(second, TIMEOUT) == "nudged"
    assert first.cancelled()
    runs = harness.journal.list_runs(context_id=ctx.id)
    assert [r.status for r in runs] == ["completed", "stopped"]


async def test_a_reset_chat_is_rebuilt_empty(harness):
    harness.model.tool("response", {"text": "one"})
    ctx = harness.chat()
    assert await harness.send(ctx, "remember this") == "one"
    ctx.reset()
    await harness.chats.flush()
    await harness.restart()
    restored = harness.get(ctx.id)
    assert restored.agent0.history.is_empty()
    assert restored.log.output() == []


async def test_run_outcome_for_clients(harness):
    harness.model.tool("response", {"text": "ok"})
    harness.model.fail(400)
    ctx, held = harness.chat(), harness.chat()
    done = await harness.submit(ctx, UserMessage("hi"))
    await asyncio.wait_for(done.task, TIMEOUT)
    assert await admission.outcome(harness.journal, done, None) == ("completed", "ok")
    stuck = await harness.submit(held, UserMessage("hi"))
    assert await asyncio.wait_for(stuck.task, TIMEOUT) == ""
    assert await admission.outcome(harness.journal, stuck, "") == ("needs_attention", None)
    again = await harness.submit(ctx, UserMessage("hi", id=done.input_id))
    assert again.kind == "duplicate"
    assert await admission.outcome(harness.journal, again, None) == ("completed", "ok")


async def test_racing_new_chats_for_one_input_leave_one_chat(harness):
    """Journal-level race: two copies of one input, each with its own generated chat id and
    no lock between them (as two processes would be). The journal's admit decides; the
    loser creates no chat and waits on the winner's run."""
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_answer(body: dict) -> dict:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(TIMEOUT)
        return {"tool_name": "response", "tool_args": {"text": "once"}}

    harness.model.respond_with(slow_answer)
    created: list[str] = []
    create = harness.chats.create

    def counted(context_id: str | None = None, **kwargs) -> AgentContext:
        created.append(str(context_id))
        return create(context_id, **kwargs)

    harness.chats.create = counted  # type: ignore[method-assign]
    copies = [UserMessage("pay once", id="in-race") for _ in range(3)]
    racers = [harness.chats._submit_new_chat(f"new-{i}", msg) for i, msg in enumerate(copies)]
    subs = await asyncio.gather(*racers)

    assert len(created) == 1
    winner = next(s for s in subs if s.kind == "started")
    assert sorted(s.kind for s in subs) == ["duplicate", "duplicate", "started"]
    assert {(s.run_id, s.context_id, s.task) for s in subs} == {
        (winner.run_id, created[0], winner.task)
    }
    assert [c for c in (f"new-{i}" for i in range(3)) if AgentContext.get(c)] == created
    release.set()
    assert await asyncio.wait_for(winner.task, TIMEOUT) == "once"
    assert [r.id for r in harness.journal.list_runs()] == [winner.run_id]
    assert harness.model.calls == 1


async def test_an_input_whose_chat_cannot_be_built_is_withdrawn(harness, monkeypatch):
    def broken(context_id: str | None = None, **kwargs) -> AgentContext:
        raise RuntimeError("no chat today")

    monkeypatch.setattr(harness.chats, "create", broken)
    with pytest.raises(RuntimeError):
        await harness.chats._submit_new_chat("never-built", UserMessage("hi", id="in-w"))
    assert harness.journal.list_runs() == []
    assert harness.journal.input_context("in-w") is None  # the id is free again
    assert AgentContext.get("never-built") is None


async def test_a_stop_before_the_run_began_still_ends_it(harness):
    """The chat's task is cancelled before it ran a single step: its run is not left
    active for nobody (the chat would refuse every later message with active_run_exists)."""
    harness.model.tool("response", {"text": "later"})
    ctx = harness.chat()
    started = await harness.submit(ctx, UserMessage("go"))
    assert started.task is not None
    ctx.kill_process()  # the task has not started yet
    with pytest.raises(asyncio.CancelledError):
        await started.task
    await harness.chats.flush()
    assert harness.journal.get_run(started.run_id).status == "stopped"
    assert harness.model.calls == 0
    assert await harness.send(ctx, "again") == "later"


async def test_a_standing_grant_for_the_chat_retries_a_failed_model_call_by_itself(harness):
    ctx = harness.chat()
    harness.journal.grant_standing("chat", ctx.id, 1, actor="alice", note="flaky provider")
    harness.model.fail(500, "provider hiccup", times=3)  # the transport's own tries, all failed
    harness.model.tool("response", {"text": "answered on the second attempt"})
    assert await harness.send(ctx, "go") == "answered on the second attempt"
    run = harness.run_of(ctx.id)
    assert run.status == "completed"
    calls = harness.journal.list_calls(run.id)
    assert [(c.seq, c.attempt, c.state) for c in calls[:2]] == [
        (0, 1, "superseded"),
        (0, 2, "completed"),
    ]
    [(use, grant)] = harness.journal.standing_grant_uses(run.id)
    assert (use.call_id, grant.actor, grant.note) == (calls[0].id, "alice", "flaky provider")
    notes = [
        i for i in ctx.log.output() if i["heading"] == "Model call retried by a standing grant"
    ]
    assert notes and "alice" in notes[0]["content"]
