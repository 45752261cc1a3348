"""Standing retry grants with real SIGKILLs (#23): a scheduled task whose runs may retry an
interrupted model call once. Killed during the model call, the run continues by itself
after the restart (the grant pays, the use is recorded); killed a second time in the same
run, it is held for a person."""

from __future__ import annotations

import pytest

from tests.integration._durable_system import Crashable, crashable
from tests.integration.test_scheduler_firing import (
    NOON,
    answer,
    clock_at,
    create_task,
    run_until_killed,
    wait_task,
)

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

KILLED_IN_MODEL_CALL = {"A0_CRASH_AT": "after_intent", "A0_CRASH_MATCH": "model"}


def _task_with_grant(harness: Crashable) -> dict:
    harness.start(**clock_at(NOON - 3600))
    task = create_task(
        harness, name="report", prompt="Report.", schedule={"minute": "0", "hour": "12"}
    )
    body = {"scope": "task", "target": task["uuid"], "attempts": 1, "note": "nightly report"}
    granted = harness.post("durable_standing_grant", body)
    assert granted.status_code == 200, granted.text
    assert granted.json()["grant"]["actor"] == "api"
    harness.stop()
    return task


def _uses(run: dict) -> list[tuple[str, str, int, str, str]]:
    return [
        (u["scope"], u["actor"], u["attempts"], u["note"], u["call_id"])
        for u in run["standing_grant_uses"]
    ]


def test_a_model_call_killed_once_is_retried_by_the_standing_grant(crashable, model_server):
    model_server.respond_with(lambda body: answer("report sent"))
    task = _task_with_grant(crashable)
    run_until_killed(crashable, {**clock_at(NOON + 1), **KILLED_IN_MODEL_CALL})
    assert model_server.calls == 0  # killed with the intent on disk, before the request

    crashable.start(**clock_at(NOON + 30))
    done = wait_task(
        crashable, task["uuid"], lambda t: t["last_status"] == "completed", "the retried run"
    )
    run = crashable.run(done["last_run_id"])
    models = [(c["attempt"], c["status"]) for c in run["calls"] if c["kind"] == "model"]
    assert models[:2] == [(1, "superseded"), (2, "completed")], run["calls"]
    first = run["calls"][0]["call_id"]
    assert _uses(run) == [("task", "api", 1, "nightly report", first)]
    assert model_server.calls == 1
    crashable.stop()


def test_a_second_kill_in_the_same_run_holds_it(crashable, model_server):
    model_server.respond_with(lambda body: answer("report sent"))
    task = _task_with_grant(crashable)
    run_until_killed(crashable, {**clock_at(NOON + 1), **KILLED_IN_MODEL_CALL})
    # the restart retries the call by itself (the grant's one try) and is killed again (a
    # failpoint key fires once per usr dir: "@1" is another key for the same point)
    again = {**KILLED_IN_MODEL_CALL, "A0_CRASH_AT": "after_intent@1"}
    run_until_killed(crashable, {**clock_at(NOON + 30), **again})
    assert model_server.calls == 0

    crashable.start(**clock_at(NOON + 60))
    held = wait_task(
        crashable, task["uuid"], lambda t: t["state"] == "held", "the task's run to be held"
    )
    run = crashable.run(held["last_run_id"])
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call")
    models = [(c["attempt"], c["status"]) for c in run["calls"] if c["kind"] == "model"]
    assert models == [(1, "superseded"), (2, "open")], run["calls"]
    assert len(_uses(run)) == 1  # used once, shown on the run
    fits = {f["decision"] for f in run["decisions_available"] if f["allowed"]}
    assert "retry_model_call" in fits
    assert model_server.calls == 0
    crashable.stop()
