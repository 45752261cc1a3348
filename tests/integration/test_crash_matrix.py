"""The crash matrix (issue #4): every failpoint boundary x every call class, against real
run_ui.py processes that SIGKILL themselves, restarted on the same journal without the
failpoint. The expected outcome of each cell is DESIGN.md section 5; docs/testing.md
explains the setup."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import httpx
import pytest

from tests.integration._crash_matrix_support import (
    BOUNDARIES,
    CALL_CLASSES,
    child_requests_for,
    crash_env,
    dump,
    effects,
    plan_of,
    plan_value,
    prepare,
    rearm_failpoints,
    requests_for,
    run_by_input,
    saw,
    shell_code,
    task_message,
)
from tests.integration._durable_system import Crashable, assert_no_repeats, crashable
from tests.integration._helpers import chat_log, log_text, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["crashable"]  # the fixture

HELD = {
    ("model", "after_intent"),
    ("model", "after_effect"),
    ("side_effect", "after_intent"),
    ("side_effect", "after_effect"),
}
RESUMED = [(c, b) for c in CALL_CLASSES for b in BOUNDARIES if (c, b) not in HELD]
DECISIONS = ("resume", "stop", "new_attempt", "confirmed_completed", "confirmed_not_completed")
NOTES = {"confirmed_completed": "checked: it happened", "confirmed_not_completed": "checked: no"}
# model calls agent 0 makes for a task of each class when nothing goes wrong
MODEL_CALLS = {"model": 1, "response": 1, "call_subordinate": 2}
# lines the side-effect log gets from one task of each class
EFFECT_LINES = {
    "side_effect": ["{label}"],
    "code_execution_tool": ["shell-{label}"],
    "call_subordinate": ["child-{label}"],
}


def _crash(crashable: Crashable, call_class: str, boundary: str, label: str) -> None:
    crashable.crash_during(
        task_message(call_class, label), label, **crash_env(boundary, CALL_CLASSES[call_class])
    )
    fired = (crashable.usr / "durability" / "failpoints-fired").read_text().splitlines()
    assert f"{boundary}:{CALL_CLASSES[call_class]}" in fired


def _calls(run: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [c for c in run["calls"] if c["name"] == name]


@pytest.mark.parametrize(("call_class", "boundary"), RESUMED)
def test_crash_then_restart_finishes_the_run_without_repeating_anything(
    crashable, model_server, call_class, boundary
):
    prepare(crashable)
    label = f"{call_class.replace('_', '-')}-{boundary.replace('_', '-')}"
    _crash(crashable, call_class, boundary, label)

    crashable.start()
    run = run_by_input(crashable, label)
    done = crashable.wait_status(run["run_id"], "completed")
    detail = dump(done)
    again = crashable.server.api_message(
        task_message(call_class, label), input_id=label, context_id=done["context_id"]
    )
    assert again.status_code == 200, again.text
    assert again.json()["response"] == f"done {label}", detail

    # committed model replies were reused: each position was asked once
    assert requests_for(model_server, label) == MODEL_CALLS.get(call_class, 2), detail
    expected = [line.format(label=label) for line in EFFECT_LINES.get(call_class, [])]
    assert effects(crashable) == expected, detail
    assert all(c["status"] == "completed" for c in done["calls"]), detail
    if call_class != "model":
        assert len(_calls(done, call_class)) == 1, detail  # one call, never a second attempt

    if call_class == "call_subordinate":
        assert child_requests_for(model_server, label) == 2, detail
        child = [c for c in done["calls"] if c["agent_no"] == 1]
        assert [c["name"] for c in child] == ["model", "side_effect", "model", "response"]
    if call_class == "code_execution_tool":
        assert saw(model_server, f"OUT-shell-{label}"), "the shell's output reached the model"
        shell = _calls(done, "code_execution_tool")[0]
        assert shell["replay_policy"] == "adapter:shell", detail
        if boundary == "after_effect":  # proven by the receipt, not run again
            assert "receipt" in shell["result"], detail
    if call_class == "durable_plan":
        plan = plan_of(crashable, done["context_id"])
        assert (plan["plan"], plan["revision"], plan["conflicts"]) == (plan_value(label), 1, [])
    crashable.stop()


def _held_expectations(call_class: str, boundary: str, decision: str) -> tuple[str, int, int]:
    """(final status, side-effect lines, agent 0 model calls) after ``decision``."""
    ran_before = boundary == "after_effect"
    if call_class == "side_effect":
        lines = int(ran_before) + (decision in ("new_attempt", "confirmed_not_completed"))
        calls = 1 + (decision != "stop")  # the tool-call reply, then the answer
    else:  # a model call held: asked again unless stopped
        lines = 0
        calls = int(ran_before) + (decision != "stop")
    return ("stopped" if decision == "stop" else "completed"), lines, calls


@pytest.mark.parametrize(("call_class", "boundary"), sorted(HELD))
def test_uncertain_call_is_held_and_each_decision_leads_where_the_design_says(
    crashable, model_server, call_class, boundary
):
    """Five runs held at the same cell (one crash each), then one decision per run."""
    prepare(crashable)
    labels = {d: f"{d.replace('_', '-')}-{boundary.replace('_', '-')}" for d in DECISIONS}
    for decision in DECISIONS:
        rearm_failpoints(crashable.usr)
        _crash(crashable, call_class, boundary, labels[decision])
    ran = boundary == "after_effect"
    if call_class == "side_effect":
        assert effects(crashable) == [labels[d] for d in DECISIONS if ran]
    before = {d: requests_for(model_server, labels[d]) for d in DECISIONS}
    assert set(before.values()) == {1 if call_class == "side_effect" or ran else 0}

    crashable.start()
    held = {d: run_by_input(crashable, labels[d]) for d in DECISIONS}
    for run in held.values():
        detail = dump(run)
        assert (run["status"], run["reason"], run["phase"]) == (
            "needs_attention",
            "uncertain_call",
            "intent_open",
        ), detail
        uncertain = [c for c in run["calls"] if not c["committed"]]
        name = CALL_CLASSES[call_class]
        assert [(c["name"], c["status"]) for c in uncertain] == [(name, "open")], detail
        assert "Run held" in log_text(chat_log(crashable.server, run["context_id"]))
        refused = crashable.server.api_message("anything new?", context_id=run["context_id"])
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "run_held"

    for decision, run in held.items():
        extra = {"note": NOTES[decision]} if decision in NOTES else {}
        response = crashable.decide(run, decision, **extra)
        assert response.status_code == 200, response.text
    for decision, run in held.items():
        status, lines, calls = _held_expectations(call_class, boundary, decision)
        final = crashable.wait_status(run["run_id"], status)
        detail = f"{decision}: {dump(final)}"
        label = labels[decision]
        assert effects(crashable).count(label) == lines, detail
        assert requests_for(model_server, label) == calls, detail
        decided = _calls(final, CALL_CLASSES[call_class])
        if decision == "resume":
            assert decided[0]["status"] == "abandoned", detail
        if decision in ("new_attempt", "confirmed_not_completed"):
            assert [c["attempt"] for c in decided][-1] == 2 and decided[-1]["status"] == "completed"
        if decision == "confirmed_completed":
            assert decided[0]["status"] == "completed", detail
            assert NOTES[decision] in decided[0]["result"], detail
            if call_class == "side_effect":  # the note is the tool's result the agent reads
                assert saw(model_server, NOTES[decision]), detail
        assert [d["decision"] for d in final["decisions"]] == [decision], detail
    crashable.stop()


def test_shell_killed_with_its_process_group_is_held_as_start_without_exit(
    crashable, model_server, tmp_path
):
    """Like a container death: the server and the shell session die together."""
    prepare(crashable)
    gate, pgid_file = tmp_path / "gate", tmp_path / "shell.pgid"
    code = (
        f"cut -d' ' -f5 /proc/$$/stat > {pgid_file}; "
        f"while [ ! -e {gate} ]; do sleep 0.05; done; " + shell_code(crashable.usr, "never")
    )
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    server = crashable.start()
    receipts = crashable.usr / "durability" / "receipts"

    def send() -> None:
        try:
            server.api_message("run the gated command", input_id="gated")
        except httpx.HTTPError:
            pass  # the server dies mid-request

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    wait_until(lambda: list(receipts.glob("*.start")), what="the shell's start marker")
    pgid = int(wait_until(lambda: pgid_file.exists() and pgid_file.read_text().strip()))
    assert pgid != os.getpgid(0)
    crashable.kill()
    os.killpg(pgid, signal.SIGKILL)
    sender.join(30)
    gate.touch()
    assert not list(receipts.glob("*.exit"))

    crashable.start()
    run = run_by_input(crashable, "gated")
    detail = dump(run)
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call"), detail
    uncertain = [c for c in run["calls"] if not c["committed"]]
    assert [(c["name"], c["status"], c["replay_policy"]) for c in uncertain] == [
        ("code_execution_tool", "open", "adapter:shell")
    ], detail
    assert effects(crashable) == []
    assert_no_repeats(effects(crashable))
    assert model_server.calls == 1
    crashable.stop()
