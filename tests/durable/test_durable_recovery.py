"""Crash at each loop boundary (in-process stand-in for SIGKILL), restart, recover."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from agent import UserMessage
from durability import RunHeld
from durability.records import DecisionRequest
from python.durable import admission, decisions
from tests.durable.conftest import prompt_text, side_effects

pytestmark = pytest.mark.unit

BOUNDARIES = ("before_intent", "after_intent", "after_effect", "after_result", "after_checkpoint")


def script_side_effect_turn(model) -> None:
    model.tool("side_effect", {"label": "pay"})
    model.tool("response", {"text": "paid"})


# (boundary) -> the run's outcome after restart when the side-effect tool was interrupted
SIDE_EFFECT_OUTCOMES = {
    "before_intent": ("completed", ["pay"]),  # nothing journaled: it runs once, after restart
    "after_intent": ("needs_attention", []),  # intent on disk, outcome unknown: held
    "after_effect": ("needs_attention", ["pay"]),  # it ran, no result: held, never re-run
    "after_result": ("completed", ["pay"]),  # result committed: reused
    "after_checkpoint": ("completed", ["pay"]),
}


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_side_effect_tool_without_adapter(harness, monkeypatch, boundary):
    script_side_effect_turn(harness.model)
    ctx = harness.chat()
    await harness.crash(ctx, "pay the bill", monkeypatch, boundary, "side_effect")
    plans = await harness.restart()
    await harness.settle(ctx.id)
    status, effects = SIDE_EFFECT_OUTCOMES[boundary]
    run = harness.run_of(ctx.id)
    assert run.status == status
    assert side_effects() == effects, "a non-allowlisted action never runs twice"
    restored = harness.get(ctx.id)
    if status == "needs_attention":
        assert run.reason == "uncertain_call"
        assert run.reason_detail["name"] == "side_effect"
        assert [p.action for p in plans] == ["hold"]
        assert any(i["type"] == "warning" for i in restored.log.output())
        with pytest.raises(RunHeld):
            await harness.submit(restored, UserMessage("anything else?"))
    else:
        assert admission.recorded_response(harness.journal, run.id) == "paid"
        assert harness.model.calls == 2, "committed model replies are reused"


MODEL_OUTCOMES = {
    "before_intent": ("completed", 2),
    "after_intent": ("needs_attention", 0),
    "after_effect": ("needs_attention", 1),
    "after_result": ("completed", 2),
    "after_checkpoint": ("completed", 2),
}


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_model_call(harness, monkeypatch, boundary):
    harness.model.tool("notify_user", {"message": "hello"})
    harness.model.tool("response", {"text": "answered"})
    ctx = harness.chat()
    await harness.crash(ctx, "say hello", monkeypatch, boundary, "model")
    await harness.restart()
    await harness.settle(ctx.id)
    status, model_calls = MODEL_OUTCOMES[boundary]
    run = harness.run_of(ctx.id)
    assert run.status == status
    assert harness.model.calls == model_calls, "the model is asked once per position"
    if status == "needs_attention":
        assert (run.reason, run.reason_detail["kind"]) == ("uncertain_call", "model")


async def test_response_tool_replays_from_the_allowlist(harness, monkeypatch):
    harness.model.tool("response", {"text": "final words"})
    ctx = harness.chat()
    await harness.crash(ctx, "answer", monkeypatch, "after_effect", "response")
    plans = await harness.restart()
    assert plans[0].action == "resume" and list(plans[0].permits.values()) == ["replay"]
    assert await harness.settle(ctx.id) == "final words"
    assert harness.run_of(ctx.id).status == "completed"
    assert harness.model.calls == 1
    responses = [i for i in harness.get(ctx.id).log.output() if i["type"] == "response"]
    assert [r["content"] for r in responses] == ["final words"]


async def test_restored_chat_shows_history_and_log(harness, monkeypatch):
    script_side_effect_turn(harness.model)
    ctx = harness.chat()
    ctx.log.log(type="user", heading="User message", content="pay the bill")
    await harness.crash(ctx, "pay the bill", monkeypatch, "after_effect", "side_effect")
    await harness.restart()
    restored = harness.get(ctx.id)
    assert restored is not ctx and restored.session.journal is harness.journal
    assert "pay the bill" in restored.agent0.history.output_text()
    assert any(i["type"] == "user" for i in restored.log.output())


def _held(harness, ctx_id):
    run = harness.run_of(ctx_id)
    assert run.status == "needs_attention"
    return run


async def _held_side_effect(harness, monkeypatch):
    script_side_effect_turn(harness.model)
    ctx = harness.chat()
    await harness.crash(ctx, "pay the bill", monkeypatch, "after_effect", "side_effect")
    await harness.restart()
    assert side_effects() == ["pay"]
    return ctx.id, _held(harness, ctx.id)


async def _decide(harness, run, decision, note=None):
    return await decisions.apply_decision(
        harness.chats,
        DecisionRequest(run.id, decision, version=run.version, actor="tester", note=note),
    )


async def test_decision_resume_abandons_the_call_and_warns_the_agent(harness, monkeypatch):
    ctx_id, run = await _held_side_effect(harness, monkeypatch)
    await _decide(harness, run, "resume")
    assert await harness.settle(ctx_id) == "paid"
    assert side_effects() == ["pay"], "resume never repeats the uncertain call"
    assert "Do not repeat it blindly" in prompt_text(harness.model.requests[-1])
    states = [c.state for c in harness.journal.list_calls(run.id)]
    assert states[1] == "abandoned" and harness.run_of(ctx_id).status == "completed"


async def test_decision_stop_ends_the_run(harness, monkeypatch):
    ctx_id, run = await _held_side_effect(harness, monkeypatch)
    outcome = await _decide(harness, run, "stop")
    assert outcome.run.status == "stopped"
    assert harness.get(ctx_id).task is None
    assert side_effects() == ["pay"]


async def test_decision_new_attempt_runs_the_step_again(harness, monkeypatch):
    ctx_id, run = await _held_side_effect(harness, monkeypatch)
    await _decide(harness, run, "new_attempt")
    assert await harness.settle(ctx_id) == "paid"
    assert side_effects() == ["pay", "pay"], "run again on purpose"
    calls = harness.journal.list_calls(run.id)
    assert [(c.seq, c.attempt, c.state) for c in calls if c.name == "side_effect"] == [
        (1, 1, "superseded"),
        (1, 2, "completed"),
    ]


async def test_decision_confirmed_completed_uses_the_note(harness, monkeypatch):
    ctx_id, run = await _held_side_effect(harness, monkeypatch)
    await _decide(harness, run, "confirmed_completed", note="bank shows the payment")
    assert await harness.settle(ctx_id) == "paid"
    assert side_effects() == ["pay"]
    assert "bank shows the payment" in prompt_text(harness.model.requests[-1])


async def test_decision_confirmed_not_completed_runs_it_for_the_first_time(harness, monkeypatch):
    ctx_id, run = await _held_side_effect(harness, monkeypatch)
    await _decide(harness, run, "confirmed_not_completed", note="no payment at the bank")
    assert await harness.settle(ctx_id) == "paid"
    assert side_effects() == ["pay", "pay"]


async def test_replay_divergence_holds(harness, monkeypatch):
    script_side_effect_turn(harness.model)
    ctx = harness.chat()
    await harness.crash(ctx, "pay the bill", monkeypatch, "after_result", "side_effect")
    harness.settings_extra["chat_model_name"] = "another-model"  # the prompt identity changed
    await harness.restart()
    await harness.settle(ctx.id)
    run = harness.run_of(ctx.id)
    assert (run.status, run.reason) == ("needs_attention", "replay_divergence")
    assert (run.reason_detail["agent_no"], run.reason_detail["seq"]) == (0, 0)
    assert harness.model.calls == 1 and side_effects() == ["pay"]


async def test_corrupt_checkpoint_holds_and_the_chat_refuses_messages(harness, monkeypatch):
    script_side_effect_turn(harness.model)
    ctx = harness.chat()
    await harness.crash(ctx, "pay the bill", monkeypatch, "after_checkpoint", "side_effect")
    harness.journal.close()
    with contextlib.closing(sqlite3.connect(harness.db)) as db:
        db.execute(
            "UPDATE checkpoints SET body = replace(body, 'pay', 'PAY') WHERE id = "
            "(SELECT max(id) FROM checkpoints)"
        )
        db.commit()
    plans = await harness.restart()
    run = harness.run_of(ctx.id)
    assert [p.action for p in plans] == ["hold"]
    assert (run.status, run.reason) == ("needs_attention", "corrupt_checkpoint")
    with pytest.raises(RunHeld):
        await harness.submit(harness.get(ctx.id), UserMessage("hello?"))
    version = run.version
    await harness.restart()
    assert harness.run_of(ctx.id).version == version, "held runs are not touched by restarts"


async def test_subordinate_resumes_without_rerunning_completed_child_calls(harness, monkeypatch):
    harness.model.tool("call_subordinate", {"message": "pay it"})
    harness.model.tool("side_effect", {"label": "child-pay"})  # agent 1
    harness.model.tool("response", {"text": "child paid"})  # agent 1
    harness.model.tool("response", {"text": "the child paid"})  # agent 0
    ctx = harness.chat()
    await harness.crash(ctx, "delegate", monkeypatch, "after_result", "side_effect")
    assert harness.model.calls == 2
    plans = await harness.restart()
    assert plans[0].action == "resume"
    assert await harness.settle(ctx.id) == "the child paid"
    assert side_effects() == ["child-pay"]
    assert harness.model.calls == 4, "the child's committed model replies were reused"
    calls = harness.journal.list_calls(harness.run_of(ctx.id).id)
    assert [(c.agent_no, c.kind, c.name) for c in calls] == [
        (0, "model", "model"),
        (0, "subordinate", "call_subordinate"),
        (1, "model", "model"),
        (1, "tool", "side_effect"),
        (1, "model", "model"),
        (1, "tool", "response"),
        (0, "model", "model"),
        (0, "tool", "response"),
    ]
    assert all(c.state == "completed" for c in calls)


async def test_shell_adapter_receipt_completed_is_reused(harness, monkeypatch):
    harness.model.tool("code_execution_tool", {"runtime": "terminal", "code": "echo hi >> f"})
    harness.model.tool("response", {"text": "ran"})
    ctx = harness.chat()
    await harness.crash(ctx, "run it", monkeypatch, "after_intent", "code_execution_tool")
    seen = []

    def shell_adapter(call):
        seen.append(call.name)
        return ("completed", "hi (from the receipt)")

    await harness.restart(adapters={"adapter:shell": shell_adapter})
    assert await harness.settle(ctx.id) == "ran"
    assert seen == ["code_execution_tool"]
    assert not (harness.workdir / "f").exists(), "the command was not run again"
    assert "hi (from the receipt)" in prompt_text(harness.model.requests[-1])


async def test_shell_adapter_not_started_runs_it(harness, monkeypatch):
    harness.model.tool("code_execution_tool", {"runtime": "terminal", "code": "echo hi >> f"})
    harness.model.tool("response", {"text": "ran"})
    ctx = harness.chat()
    await harness.crash(ctx, "run it", monkeypatch, "after_intent", "code_execution_tool")
    await harness.restart(adapters={"adapter:shell": lambda call: "not_started"})
    assert await harness.settle(ctx.id) == "ran"
    assert (harness.workdir / "f").read_text() == "hi\n"


@pytest.mark.parametrize("verdict", ["unknown", "rejected:digest_mismatch", None])
async def test_shell_without_proof_holds(harness, monkeypatch, verdict):
    harness.model.tool("code_execution_tool", {"runtime": "terminal", "code": "echo hi >> f"})
    ctx = harness.chat()
    await harness.crash(ctx, "run it", monkeypatch, "after_intent", "code_execution_tool")
    adapters = {"adapter:shell": lambda call: verdict} if verdict else None
    await harness.restart(adapters=adapters)
    run = harness.run_of(ctx.id)
    assert (run.status, run.reason) == ("needs_attention", "uncertain_call")
    if verdict and verdict.startswith("rejected"):
        assert run.reason_detail["receipt_reason"] == "digest_mismatch"
        events = harness.journal.list_events(run_id=run.id)
        assert any(e.type == "receipt_rejected" for e in events)


async def test_a_run_that_keeps_crashing_is_parked(harness, monkeypatch):
    from durability import failpoints

    harness.model.tool("notify_user", {"message": "x"})
    ctx = harness.chat()
    await harness.crash(ctx, "go", monkeypatch, "before_intent", "model")
    for _ in range(3):  # every restart dies again before making progress
        (harness.usr / "durability" / failpoints.FIRED_FILE).unlink()
        monkeypatch.setenv(failpoints.CRASH_AT_ENV, "before_intent")
        monkeypatch.setenv(failpoints.CRASH_MATCH_ENV, "model")
        with failpoints.raise_instead():
            plans = await harness.restart()
            assert plans[0].action == "resume"
            with pytest.raises(failpoints.SimulatedCrash):
                await harness.settle(ctx.id)
    monkeypatch.delenv(failpoints.CRASH_AT_ENV)
    plans = await harness.restart()
    run = harness.run_of(ctx.id)
    assert (run.status, run.reason) == ("needs_attention", "recovery_attempts_exceeded")
    assert plans[0].action == "hold"


async def test_at_most_two_runs_resume_at_once(harness, monkeypatch):
    import threading
    import time

    from durability import failpoints

    chats = []
    for n in range(3):
        harness.model.tool("side_effect", {"label": f"pay-{n}"})
        ctx = harness.chat()
        (harness.usr / "durability" / failpoints.FIRED_FILE).unlink(missing_ok=True)
        await harness.crash(ctx, f"pay {n}", monkeypatch, "after_result", "side_effect")
        chats.append(ctx.id)
    lock = threading.Lock()
    in_flight = {"now": 0, "max": 0}

    def slow_model(body):
        with lock:
            in_flight["now"] += 1
            in_flight["max"] = max(in_flight["max"], in_flight["now"])
        time.sleep(0.4)  # a slow provider, so that overlapping resumes would overlap here
        with lock:
            in_flight["now"] -= 1
        return {"tool_name": "response", "tool_args": {"text": "paid"}}

    harness.model.respond_with(slow_model)
    plans = await harness.restart()
    assert [p.action for p in plans] == ["resume"] * 3
    for ctx_id in chats:
        assert await harness.settle(ctx_id) == "paid"
    assert in_flight["max"] == 2, in_flight
    assert sorted(side_effects()) == ["pay-0", "pay-1", "pay-2"]


@pytest.mark.parametrize(
    ("boundary", "plan_action", "lines"),
    [("after_intent", "resume", 1), ("after_effect", "resume", 1)],
)
async def test_real_shell_receipts_prove_the_outcome(
    harness, monkeypatch, boundary, plan_action, lines
):
    from durability.adapters import ShellReceipts

    harness.receipts = ShellReceipts(harness.usr / "durability" / "receipts")
    harness.model.tool("code_execution_tool", {"runtime": "terminal", "code": "echo hi >> f"})
    harness.model.tool("response", {"text": "ran"})
    ctx = harness.chat()
    await harness.crash(ctx, "run it", monkeypatch, boundary, "code_execution_tool")
    plans = await harness.restart()
    assert [p.action for p in plans] == [plan_action]
    assert await harness.settle(ctx.id) == "ran"
    assert (harness.workdir / "f").read_text() == "hi\n" * lines, "the command ran once"
    calls = harness.journal.list_calls(harness.run_of(ctx.id).id)
    shell = next(c for c in calls if c.name == "code_execution_tool")
    assert shell.state == "completed"
    if boundary == "after_effect":
        assert "receipt" in shell.result, "the receipt's output is the result"


async def test_a_failing_utility_model_is_journaled_and_replayed_without_a_hold(
    harness, monkeypatch
):
    from tests.support.model_server import ScriptedFailure

    utility_calls = []

    def respond(body):
        if "You condense" in str(body["messages"][0]["content"]):
            utility_calls.append(body)
            return ScriptedFailure(400, "utility refuses")
        return {"tool_name": "side_effect", "tool_args": {"label": "after-compression"}}

    harness.model.respond_with(respond)
    harness.settings_extra.update(chat_model_ctx_length=3000, chat_model_ctx_history=0.5)
    ctx = harness.chat()
    for i in range(8):
        ctx.agent0.history.add(False, f"old question {i} " + "q" * 1500)
        ctx.agent0.history.add(True, f"old answer {i} " + "a" * 1500)
        ctx.agent0.history.new_topic()
    await harness.crash(ctx, "newest", monkeypatch, "after_result", "side_effect")
    assert utility_calls, "compression asked the utility model"
    calls = harness.journal.list_calls(harness.run_of(ctx.id).id)
    assert any(c.state == "failed" and c.args["kind"] == "utility" for c in calls)
    requests = harness.model.calls
    harness.model.respond_with(lambda body: {"tool_name": "response", "tool_args": {"text": "ok"}})
    await harness.restart()
    assert await harness.settle(ctx.id) == "ok"
    assert harness.model.calls == requests + 1, "the failed utility call was not repeated"
    assert side_effects() == ["after-compression"]


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_subordinate_child_workflow_at_every_boundary(harness, monkeypatch, boundary):
    harness.model.tool("call_subordinate", {"message": "pay it"})
    harness.model.tool("side_effect", {"label": "child-pay"})  # agent 1
    harness.model.tool("response", {"text": "child paid"})  # agent 1
    harness.model.tool("response", {"text": "the child paid"})  # agent 0
    ctx = harness.chat()
    await harness.crash(ctx, "delegate", monkeypatch, boundary, "call_subordinate")
    plans = await harness.restart()
    assert [p.action for p in plans] == ["resume"], "a child workflow is never uncertain"
    assert await harness.settle(ctx.id) == "the child paid"
    assert side_effects() == ["child-pay"]
    assert harness.model.calls == 4, "no model reply was asked for twice"


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_response_at_every_boundary(harness, monkeypatch, boundary):
    harness.model.tool("response", {"text": "final"})
    ctx = harness.chat()
    await harness.crash(ctx, "answer", monkeypatch, boundary, "response")
    await harness.restart()
    assert await harness.settle(ctx.id) == "final"
    assert harness.run_of(ctx.id).status == "completed"
    assert harness.model.calls == 1


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_durable_plan_at_every_boundary(harness, monkeypatch, boundary):
    plan = {"title": "trip", "items": [{"id": "1", "text": "book", "done": False}]}
    harness.model.tool("durable_plan", {"action": "replace", "expected_revision": 0, "plan": plan})
    harness.model.tool("response", {"text": "planned"})
    ctx = harness.chat()
    await harness.crash(ctx, "plan it", monkeypatch, boundary, "durable_plan")
    await harness.restart()
    assert await harness.settle(ctx.id) == "planned"
    document = harness.journal.read_document(ctx.id, "plan")
    assert (document.revision, document.value["title"]) == (1, "trip")
    assert not harness.journal.list_conflicts(ctx.id), "a replayed replace is a no-op"
    assert harness.model.calls == 2


async def test_an_intervention_in_agent_0_survives_a_later_crash(harness, monkeypatch):
    import asyncio

    from durability import failpoints

    harness.model.tool("wait", {"seconds": 60})
    harness.model.tool("side_effect", {"label": "after-intervention"})
    harness.model.tool("response", {"text": "done after the intervention"})
    ctx = harness.chat()
    monkeypatch.setenv(failpoints.CRASH_AT_ENV, "after_result")
    monkeypatch.setenv(failpoints.CRASH_MATCH_ENV, "side_effect")
    with failpoints.raise_instead():
        started = await harness.submit(ctx, UserMessage("wait", id="in-1"))

        def wait_running() -> bool:
            calls = harness.journal.open_intents(started.run_id)
            return any(c.name == "wait" for c in calls)

        async def poll() -> None:
            while not await asyncio.to_thread(wait_running):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(poll(), 30)
        await harness.submit(ctx, UserMessage("stop waiting, pay now", id="in-2"))
        with pytest.raises(failpoints.SimulatedCrash):
            await asyncio.wait_for(started.task, 30)
    monkeypatch.delenv(failpoints.CRASH_AT_ENV)
    await harness.restart()
    assert await harness.settle(ctx.id) == "done after the intervention"
    assert side_effects() == ["after-intervention"]
    assert harness.model.calls == 3
    assert "stop waiting, pay now" in prompt_text(harness.model.requests[-1])
