"""The crash matrix of the memory tools (issue #19, point 5): a real run_ui.py SIGKILLs
itself at every boundary around memory_save, memory_delete, memory_forget and memory_load
(the loop's five, and inside the one transaction of the writes and the result), restarts on
the same journal, and the run completes: no memory stored twice, none lost, no hold, and
the model is not asked again for a step it already answered."""

from __future__ import annotations

import json
import signal
import threading

import httpx
import pytest

from tests.integration._crash_matrix_support import BOUNDARIES, crash_env, tool
from tests.integration._durable_system import crashable
from tests.integration._helpers import request_text, wait_until
from tests.integration._memory_support import agent_requests, memories, memory_env, responder, save

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["crashable"]  # the fixture

ATOMIC_POINT = "journal.commit_result_with.writes_applied"
KEEP = "Unrelated note about the office coffee machine schedule"
GONE = "The staging database password rotates every Monday at noon"
NEW = "The nightly backup of project Heron runs at two in the morning"
TOOLS = ("memory_save", "memory_delete", "memory_forget", "memory_load")
CASES = [(t, b) for t in TOOLS for b in BOUNDARIES] + [
    (t, ATOMIC_POINT) for t in TOOLS if t != "memory_load"
]


def _step(tool_name: str, gone_id: str) -> dict:
    if tool_name == "memory_save":
        return save(NEW)
    if tool_name == "memory_delete":
        return tool("memory_delete", {"ids": f"{gone_id}, no-such-id"})
    if tool_name == "memory_forget":
        return tool("memory_forget", {"query": GONE, "threshold": 0.9})
    return tool("memory_load", {"query": GONE, "threshold": 0.9})


@pytest.mark.parametrize(("tool_name", "boundary"), CASES)
def test_a_memory_call_killed_at_any_boundary_runs_exactly_once(
    crashable, model_server, tool_name, boundary
):
    steps: dict[str, list[dict]] = {"seed": [save(KEEP), save(GONE)]}
    model_server.respond_with(responder(steps))
    env = memory_env(model_server, memory_memorize_enabled=False, memory_recall_enabled=False)
    # the two seed saves reach a loop point first; the journal's point names no call, and
    # each monologue's start reads the behaviour rules through it too (seed: 3 times)
    if boundary == ATOMIC_POINT:
        point = f"{boundary}@5"
    else:
        point = f"{boundary}@3" if tool_name == "memory_save" else boundary
    server = crashable.start(**env, **crash_env(point, tool_name))
    assert server.api_message("TASK[seed:seed] keep these", input_id="seed").status_code == 200
    gone_id = next(m["id"] for m in memories(crashable.usr) if m["text"] == GONE)
    steps["x"] = [_step(tool_name, gone_id)]
    _dies_during(crashable, "TASK[mem:x] do the memory step", "x")

    crashable.start(**env)  # recovery: the run resumes, nothing is held
    run = next(r for r in crashable.runs() if r["input_id"] == "x")
    done = crashable.wait_status(run["run_id"], "completed")
    assert not crashable.runs(status="needs_attention")
    calls = [c for c in done["calls"] if c["name"] == tool_name]
    assert [(c["replay_policy"], c["committed"]) for c in calls] == [("journal_atomic", True)]
    asked = agent_requests(model_server, "x")
    assert len(asked) == 2, [request_text(b)[-300:] for b in asked]  # nothing asked twice
    final = request_text(asked[-1])
    crashable.stop()

    texts = sorted(m["text"] for m in memories(crashable.usr))
    if tool_name == "memory_save":
        assert texts == sorted([KEEP, GONE, NEW])  # stored once, not lost
        assert "Memory saved with id" in final
    elif tool_name in ("memory_delete", "memory_forget"):
        assert texts == [KEEP]  # deleted, and nothing else
        assert json.dumps({"memories_deleted": "1"}) in final.replace("\\", "")
    else:
        assert texts == sorted([KEEP, GONE])
        assert GONE in final


def _after_rules(point: str) -> str:
    """The journal's point names no call: the monologue's read of the behaviour rules
    reaches it first, the call under test second."""
    return f"{point}@2" if point == ATOMIC_POINT else point


def _dies_during(crashable, message: str, input_id: str) -> None:
    """Send ``message`` to the running server and wait until it killed itself."""
    server = crashable.server
    sender = threading.Thread(
        target=lambda: _quietly(lambda: server.api_message(message, input_id=input_id)),
        daemon=True,
    )
    sender.start()
    code = wait_until(lambda: server.process.poll(), timeout=120, what="the failpoint")
    sender.join(30)
    server.kill()
    crashable.server = None
    assert code == -signal.SIGKILL, f"exit {code}:\n{server.output()[-3000:]}"


def _quietly(send) -> None:
    try:
        send()
    except httpx.HTTPError:  # the server died mid-request
        pass


FACTS = ["Project Heron stores its backups on the host vault-7", "Project Heron uses Postgres 15"]


@pytest.mark.parametrize(
    "point", ["after_intent", "after_effect", ATOMIC_POINT, "after_result", "before_intent"]
)
def test_memorize_killed_at_any_boundary_stores_each_fact_once(crashable, model_server, point):
    """The end-of-monologue memorize call: killed before, inside or after its one transaction,
    the run completes after the restart and every fact is stored exactly once; the utility
    model's committed answer is reused, not asked for again."""
    steps: dict[str, list[dict]] = {"m": []}  # agent 0 answers at once
    utility = {"You pick facts worth remembering": json.dumps(FACTS)}
    model_server.respond_with(responder(steps, utility))
    env = memory_env(model_server, memory_recall_enabled=False)
    crashable.start(**env, **crash_env(_after_rules(point), "memorize_fragments"))
    _dies_during(crashable, "TASK[mem:m] tell me about Heron", "m")

    crashable.start(**env)
    run = next(r for r in crashable.runs() if r["input_id"] == "m")
    done = crashable.wait_status(run["run_id"], "completed")
    assert not crashable.runs(status="needs_attention")
    names = [c["name"] for c in done["calls"]]
    assert names.count("memorize_fragments") == 1 and names.count("memorize_solutions") == 1
    memorize = next(c for c in done["calls"] if c["name"] == "memorize_fragments")
    assert memorize["replay_policy"] == "journal_atomic" and memorize["committed"]
    asked = [b for b in model_server.requests if "You pick facts worth" in request_text(b)]
    assert len(asked) == 1  # the utility call is journaled and was reused
    crashable.stop()
    stored = sorted(m["text"] for m in memories(crashable.usr) if m["area"] == "fragments")
    assert stored == sorted(FACTS)


@pytest.mark.parametrize("point", ["after_intent", "after_effect", ATOMIC_POINT, "after_result"])
def test_behaviour_adjustment_killed_at_any_boundary_merges_once(crashable, model_server, point):
    """behaviour_adjustment asks the utility model itself (a journaled call inside the tool
    call): run again after a crash it reuses that answer, and a reused result skips it."""
    steps = {"r": [tool("behaviour_adjustment", {"adjustments": "Answer briefly."})]}
    model_server.respond_with(responder(steps))
    env = memory_env(model_server, memory_memorize_enabled=False, memory_recall_enabled=False)
    crashable.start(**env, **crash_env(_after_rules(point), "behaviour_adjustment"))
    _dies_during(crashable, "TASK[mem:r] be brief", "r")

    crashable.start(**env)
    run = next(r for r in crashable.runs() if r["input_id"] == "r")
    crashable.wait_status(run["run_id"], "completed")
    assert not crashable.runs(status="needs_attention")
    merges = [b for b in model_server.requests if "You maintain the behaviour" in request_text(b)]
    assert len(merges) == 1
    final = agent_requests(model_server, "r")[-1]
    assert "- Answer briefly." in final["messages"][0]["content"]
    assert len(agent_requests(model_server, "r")) == 2
    crashable.stop()
    rules = [m for m in memories(crashable.usr) if m["area"] == "behaviour"]
    assert [m["text"] for m in rules] == ["## Style\n- Answer briefly."]
