"""Durable firing with real restarts around a slot: a real run_ui.py, SIGKILL, the scripted
model, and the scheduler's clock put next to a slot with A0_SCHEDULER_CLOCK_OFFSET.

Each test creates its task on a first server, then starts the server again with the clock
just before or after the slot it is about; real time passes meanwhile, so every assertion
allows the slot to come during a start (a slot that passed while the server was starting is
a missed slot, and fires once all the same)."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import signal
import time
from typing import Any

import httpx
import pytest

from tests.integration._durable_system import (
    PROVIDER_KEY,
    Crashable,
    assert_no_repeats,
    crashable,
    install_side_effect_tool,
    side_effects,
)
from tests.integration._helpers import chat_log, log_text, request_text, wait_until
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

NOON = dt.datetime(2030, 1, 1, 12, 0, tzinfo=dt.UTC).timestamp()
CLOCK = "A0_SCHEDULER_CLOCK_OFFSET"


def slot_id(task_id: str, instant: float) -> str:
    return f"sched:{task_id}:{dt.datetime.fromtimestamp(instant, dt.UTC).isoformat()}"


def clock_at(virtual_now: float) -> dict[str, str]:
    """The environment that makes the scheduler's clock read ``virtual_now`` now."""
    return {CLOCK: repr(virtual_now - time.time())}


def answer(text: str) -> dict[str, Any]:
    return {
        "thoughts": ["..."],
        "headline": "",
        "tool_name": "response",
        "tool_args": {"text": text},
    }


def create_task(harness: Crashable, **fields: Any) -> dict[str, Any]:
    response = harness.post("scheduler_task_create", fields)
    assert response.status_code == 200, response.text
    return response.json()["task"]


def get_task(harness: Crashable, task_id: str) -> dict[str, Any]:
    response = harness.post("scheduler_tasks_list", {})
    assert response.status_code == 200, response.text
    [task] = [t for t in response.json()["tasks"] if t["uuid"] == task_id]
    return task


def wait_task(harness: Crashable, task_id: str, check, what: str, timeout: float = 90) -> dict:
    def reached() -> dict | None:
        task = get_task(harness, task_id)
        return task if check(task) else None

    return wait_until(reached, timeout=timeout, what=what)


def run_until_killed(harness: Crashable, env: dict[str, str]) -> None:
    """Start run_ui.py with a failpoint that fires soon after start (maybe before it is
    healthy) and wait until it has killed itself."""
    harness.generation += 1
    base = {**ui_env_for(harness.model), "API_KEY_OTHER": PROVIDER_KEY}
    server = UiServer(harness.usr, env={**base, **env})
    server.log_path = harness.usr.parent / f"run_ui-{harness.generation}.log"
    try:
        server.start(timeout=SLOW_START)
    except RuntimeError:
        pass  # it died at the failpoint before it answered /api/health
    assert server.process is not None
    code = server.process.wait(120)
    server.kill()
    assert code == -signal.SIGKILL, f"exit {code}:\n{server.output()[-3000:]}"


def tick(harness: Crashable) -> list[dict[str, Any]]:
    assert harness.server is not None
    response = httpx.post(f"{harness.server.url}/api/scheduler_tick", json={}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["firings"]


def test_a_slot_admitted_right_before_a_crash_fires_once_after_the_restart(crashable, model_server):
    model_server.respond_with(lambda body: answer("pong"))
    crashable.start(**clock_at(NOON - 3600))
    task = create_task(
        crashable, name="noon", prompt="Say pong.", schedule="0 12 * * *", timezone="UTC"
    )
    assert task["next_run"] == "2030-01-01T12:00:00+00:00"
    crashable.stop()

    # the slot is due as this server starts; it dies right after the admission, before the
    # bookkeeping (and before the run's first step)
    run_until_killed(
        crashable,
        {
            **clock_at(NOON + 1),
            "A0_CRASH_AT": "scheduler.after_admit",
            "A0_CRASH_MATCH": "scheduler",
        },
    )
    fired = (crashable.usr / "durability" / "failpoints-fired").read_text()
    assert "scheduler.after_admit" in fired

    crashable.start(**clock_at(NOON + 20))
    done = wait_task(
        crashable,
        task["uuid"],
        lambda t: t["last_status"] == "completed",
        "the slot's run to complete",
    )
    assert done["last_input_id"] == slot_id(task["uuid"], NOON)
    assert done["last_slot"] == "2030-01-01T12:00:00+00:00"
    runs = crashable.runs()
    assert [r["input_id"] for r in runs] == [slot_id(task["uuid"], NOON)]
    assert model_server.calls == 1  # one run, resumed once: the slot never fired twice
    assert "Say pong." in request_text(model_server.requests[0])
    assert tick(crashable) == []  # the slot is handled
    log = log_text(chat_log(crashable.server, task["context_id"]))
    assert "pong" in log
    crashable.stop()


def test_slots_missed_while_down_fire_once_the_latest(crashable, model_server):
    model_server.respond_with(lambda body: answer("tick"))
    crashable.start(**clock_at(NOON + 30))
    task = create_task(
        crashable, name="ten minutes", prompt="Count.", schedule="*/10 * * * *", timezone="UTC"
    )
    assert task["next_run"] == "2030-01-01T12:10:00+00:00"
    crashable.stop()

    crashable.start(**clock_at(NOON + 65 * 60))  # 13:05: six slots passed while down
    done = wait_task(
        crashable,
        task["uuid"],
        lambda t: t["last_status"] == "completed",
        "the latest missed slot's run",
    )
    assert done["last_slot"] == "2030-01-01T13:00:00+00:00"
    assert done["next_run"] == "2030-01-01T13:10:00+00:00"
    assert [r["input_id"] for r in crashable.runs()] == [slot_id(task["uuid"], NOON + 3600)]
    crashable.stop()

    crashable.start(**clock_at(NOON + 65 * 60 + 5))  # the same gap again: nothing new
    assert tick(crashable) == []
    assert len(crashable.runs()) == 1 and model_server.calls == 1
    crashable.stop()


def test_a_firing_interrupted_mid_run_recovers_like_any_run(crashable, model_server):
    model_server.respond_with(lambda body: answer("recovered"))
    crashable.start(**clock_at(NOON - 3600))
    task = create_task(
        crashable, name="noon", prompt="Report.", schedule={"minute": "0", "hour": "12"}
    )
    crashable.stop()

    # the firing's run dies with its model reply committed
    run_until_killed(
        crashable, {**clock_at(NOON + 1), "A0_CRASH_AT": "after_result", "A0_CRASH_MATCH": "model"}
    )
    assert model_server.calls == 1

    crashable.start(**clock_at(NOON + 30))
    done = wait_task(
        crashable, task["uuid"], lambda t: t["last_status"] == "completed", "the recovered run"
    )
    [run] = crashable.runs()
    assert run["input_id"] == slot_id(task["uuid"], NOON) == done["last_input_id"]
    assert model_server.calls == 1  # the committed reply was reused, nothing ran again
    assert tick(crashable) == []
    crashable.stop()


def _job_responder() -> Any:
    """A firing's first model call asks for the side-effect tool (labelled job-1, job-2, ...
    in the order they are asked: a committed reply is reused on resume, never asked again),
    the next one answers."""
    asked = itertools.count(1)

    def respond(body: dict) -> dict[str, Any]:
        messages = body.get("messages", [])
        marks = [i for i, m in enumerate(messages) if "RUN-THE-JOB" in str(m.get("content"))]
        later = messages[marks[-1] + 1 :] if marks else []
        if marks and not any(m.get("role") == "assistant" for m in later):
            return {
                "thoughts": ["..."],
                "headline": "",
                "tool_name": "side_effect",
                "tool_args": {"label": f"job-{next(asked)}"},
            }
        return answer("job done")

    return respond


def test_a_held_firing_skips_slots_until_decided_and_then_the_task_goes_on(crashable, model_server):
    install_side_effect_tool(crashable.usr)
    model_server.respond_with(_job_responder())
    crashable.start(**clock_at(NOON - 3600))
    task = create_task(
        crashable, name="job", prompt="RUN-THE-JOB", schedule="*/10 * * * *", timezone="UTC"
    )
    crashable.stop()

    # the 12:00 firing dies after its side effect, before the result: uncertain
    run_until_killed(
        crashable,
        {**clock_at(NOON + 1), "A0_CRASH_AT": "after_effect", "A0_CRASH_MATCH": "side_effect"},
    )
    assert side_effects(crashable.usr) == ["job-1"]

    crashable.start(**clock_at(NOON + 5 * 60))
    held = wait_task(
        crashable, task["uuid"], lambda t: t["state"] == "held", "the task to show its held run"
    )
    assert held["last_input_id"] == slot_id(task["uuid"], NOON)
    run = crashable.run(held["last_run_id"])
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call")
    crashable.stop()

    crashable.start(**clock_at(NOON + 10 * 60 + 5))  # 12:10 comes while the run is held
    skipped = wait_task(
        crashable,
        task["uuid"],
        lambda t: (t["last_skip"] or {}).get("slot") == "2030-01-01T12:10:00+00:00",
        "the 12:10 slot to be skipped",
    )
    assert skipped["last_skip"]["reason"] == "run_held" and skipped["state"] == "held"
    run = crashable.run(held["last_run_id"])
    decided = crashable.decide(run, "stop")
    assert decided.status_code == 200, decided.text
    idle = wait_task(crashable, task["uuid"], lambda t: t["state"] == "idle", "idle again")
    assert idle["last_status"] == "stopped"  # the decision ended it; the task is not stuck
    crashable.stop()

    crashable.start(**clock_at(NOON + 20 * 60 + 5))  # 12:20: the task goes on
    done = wait_task(
        crashable,
        task["uuid"],
        lambda t: t["last_slot"] == "2030-01-01T12:20:00+00:00" and t["last_status"] == "completed",
        "the 12:20 firing to complete",
    )
    assert done["state"] == "idle"
    assert side_effects(crashable.usr) == ["job-1", "job-2"]
    assert_no_repeats(side_effects(crashable.usr))
    inputs = sorted(r["input_id"] for r in crashable.runs())
    assert inputs == sorted([slot_id(task["uuid"], NOON), slot_id(task["uuid"], NOON + 1200)])
    crashable.stop()


_UUID = re.compile(r'"uuid": "([0-9a-f-]{36})"')


def _agent_responder(body: dict) -> dict[str, Any]:
    """The agent creates an ad hoc task, runs it and waits for it; the task's own chat
    answers CHILD-PROMPT. Decided from the request's content, never from arrival order."""
    messages = body.get("messages", [])
    users = [m for m in messages if m.get("role") == "user"]
    if (
        users
        and "CHILD-PROMPT" in str(users[0].get("content"))
        and "please" not in str(users[0].get("content"))
    ):
        return answer("child answer 42")
    text = "\n".join(str(m.get("content")) for m in messages)
    steps = len([m for m in messages if m.get("role") == "assistant"])
    found = _UUID.findall(text)
    if steps == 0:
        return {
            "thoughts": ["..."],
            "headline": "",
            "tool_name": "scheduler:create_adhoc_task",
            "tool_args": {"name": "child", "prompt": "CHILD-PROMPT", "dedicated_context": True},
        }
    if steps == 1:
        return answer("created")
    if steps == 2:
        return {
            "thoughts": ["..."],
            "headline": "",
            "tool_name": "scheduler:run_task",
            "tool_args": {"uuid": found[0]},
        }
    if steps == 3:
        return {
            "thoughts": ["..."],
            "headline": "",
            "tool_name": "scheduler:wait_for_task",
            "tool_args": {"uuid": found[0], "timeout": 60},
        }
    said = re.search(r"child answer \d+", text)
    return answer(f"the task said: {said.group(0) if said else 'nothing'}")


def test_the_agent_creates_runs_and_waits_for_a_task_with_the_tool(crashable, model_server):
    model_server.respond_with(_agent_responder)
    crashable.start()
    first = crashable.server.api_message(
        "please make a task that says CHILD-PROMPT", input_id="ask-1"
    )
    assert first.json()["response"] == "created", first.text
    chat = first.json()["context_id"]
    [task] = crashable.post("scheduler_tasks_list", {}).json()["tasks"]
    assert (task["type"], task["created_by"], task["dedicated_context"]) == (
        "adhoc",
        "agent0",
        True,
    )
    assert task["context_id"] == task["uuid"] != chat

    second = crashable.server.api_message("now run it and wait", input_id="ask-2", context_id=chat)
    assert second.json()["response"] == "the task said: child answer 42", second.text
    task = get_task(crashable, task["uuid"])
    assert (task["state"], task["last_status"]) == ("idle", "completed")
    assert task["last_input_id"].startswith(f"sched:{task['uuid']}:run:")
    child_runs = crashable.runs(context_id=task["uuid"])
    assert [r["input_id"] for r in child_runs] == [task["last_input_id"]]
    crashable.stop()
