"""A tool result the journal cannot store closes the call as an error the agent sees.

The call is committed as failed with ``result_not_storable`` and the type that could not be
stored; the agent gets it as a warning and the run goes on; a replay after a crash meets
the same error and never runs the tool again; no run ends with its call left open.
"""

from __future__ import annotations

import pytest

from agent import AgentContext
from durability import failpoints
from python.durable import results as durable_result
from tests.durable.conftest import install_unstorable_tool, prompt_text, side_effects

pytestmark = pytest.mark.unit

CASES = [
    ("set", "set"),
    ("object", "object"),
    ("nan", "float"),
    ("surrogate", "str"),
    ("not_response", "set"),
]

CRASH_ONCE = """
from durability.failpoints import SimulatedCrash
from python.helpers import files
from python.helpers.extensions import Extension


class CrashOnce(Extension):
    async def execute(self, **kwargs):
        marker = files.usr_dir() / "crash-once"
        if marker.exists():
            marker.unlink()
            raise SimulatedCrash("message_loop_end", "test")
"""


def tool_calls(harness, run_id: str) -> list:
    return [c for c in harness.journal.list_calls(run_id) if c.name == "unstorable"]


@pytest.mark.parametrize(("kind", "type_name"), CASES)
async def test_an_unstorable_result_is_an_error_the_agent_sees(harness, kind, type_name):
    install_unstorable_tool(harness.usr)
    harness.model.tool("unstorable", {"kind": kind})
    harness.model.tool("response", {"text": "went on"})
    ctx = harness.chat()

    assert await harness.send(ctx, "use the odd tool") == "went on"

    run = harness.run_of(ctx.id)
    assert run.status == "completed"
    assert harness.journal.open_intents(run.id) == []
    [call] = tool_calls(harness, run.id)
    assert call.state == "failed"
    assert call.result["error"] == durable_result.NOT_STORABLE
    assert call.result["type"] == type_name
    assert "could not be recorded" in call.result["message"]
    assert "could not be recorded" in prompt_text(harness.model.requests[1])
    assert side_effects() == [f"unstorable:{kind}"]
    warnings = [i for i in ctx.log.output() if i["type"] == "warning"]
    assert any("unstorable" in str(i["content"]) for i in warnings)


async def test_a_replay_meets_the_recorded_error_and_never_runs_the_tool_again(
    harness, monkeypatch
):
    install_unstorable_tool(harness.usr)
    point = harness.usr / "agents" / "agent0" / "extensions" / "message_loop_end"
    point.mkdir(parents=True)
    (point / "_99_crash_once.py").write_text(CRASH_ONCE)
    (harness.usr / "crash-once").touch()  # the first iteration's end dies: no new resume base
    harness.model.tool("unstorable", {"kind": "object"})
    harness.model.tool("response", {"text": "after the replay"})
    ctx = harness.chat()

    with failpoints.raise_instead(), pytest.raises(failpoints.SimulatedCrash):
        await harness.send(ctx, "use the odd tool")
    first_prompt = prompt_text(harness.model.requests[0])
    plans = await harness.restart()

    assert [p.action for p in plans] == ["resume"]
    assert await harness.settle(ctx.id) == "after the replay"
    run = harness.run_of(ctx.id)
    assert run.status == "completed"
    assert side_effects() == ["unstorable:object"], "the tool ran once"
    [call] = tool_calls(harness, run.id)
    assert (call.state, call.result["type"]) == ("failed", "object")
    # the model was asked once before the crash and once after the replayed warning
    assert harness.model.calls == 2
    assert prompt_text(harness.model.requests[0]) == first_prompt
    assert "could not be recorded" in prompt_text(harness.model.requests[1])
    assert AgentContext.get(ctx.id) is not None


async def test_a_run_never_ends_with_an_open_call(harness, monkeypatch):
    """If anything let a call escape without its outcome, the loop holds the run instead of
    ending it (the engine refuses to end a run with open intents)."""
    from python.durable import seams

    harness.model.tool("side_effect", {"label": "one"})
    harness.model.tool("response", {"text": "never"})

    async def commit_nothing(journal, agent, tool, call, response):
        from agent import HandledException

        raise HandledException("the result was lost on the way")

    monkeypatch.setattr(seams.results, "commit", commit_nothing)
    ctx = harness.chat()

    await harness.send(ctx, "do it")

    run = harness.run_of(ctx.id)
    assert run.status == "needs_attention"
    assert run.reason == "uncertain_call"
    assert run.reason_detail["why"] == "run_ended_with_open_call"
    assert [c.name for c in harness.journal.open_intents(run.id)] == ["side_effect"]
    assert not [e for e in harness.journal.list_events(run_id=run.id) if e.type == "run_result"]
