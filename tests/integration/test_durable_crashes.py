"""System crash tests: run_ui.py SIGKILLs itself at a failpoint and restarts on the same
journal; recovery follows DESIGN.md section 5 (the scripted model counts model calls)."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing

import httpx
import pytest

from tests.integration._durable_system import (
    assert_no_repeats,
    corrupt_latest_checkpoint,
    crashable,
    install_side_effect_tool,
    side_effects,
)
from tests.integration._helpers import chat_log, log_text, request_text, wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture


def _crash_env(boundary: str, match: str) -> dict[str, str]:
    return {"A0_CRASH_AT": boundary, "A0_CRASH_MATCH": match}


def test_side_effect_crashed_after_effect_is_held_and_each_decision_leads_on(
    crashable, model_server
):
    install_side_effect_tool(crashable.usr)
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.tool("response", {"text": "paid once"})
    crashable.crash_during("pay the bill", "pay", **_crash_env("after_effect", "side_effect"))
    assert side_effects(crashable.usr) == ["pay-1"]
    assert model_server.calls == 1

    crashable.start()
    run = crashable.only_run()
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call")
    assert run["phase"] == "intent_open"
    uncertain = [c for c in run["calls"] if not c["committed"]]
    assert [(c["name"], c["status"], c["replay_policy"]) for c in uncertain] == [
        ("side_effect", "open", "hold")
    ]
    assert "Run held" in log_text(chat_log(crashable.server, run["context_id"]))

    held = crashable.server.api_message("anything new?", context_id=run["context_id"])
    assert held.status_code == 409 and held.json()["error"]["code"] == "run_held"
    assert held.json()["error"]["run_id"] == run["run_id"]
    assert held.json()["error"]["version"] == run["version"]
    no_note = crashable.decide(run, "confirmed_completed")
    assert no_note.status_code == 422 and no_note.json()["error"]["code"] == "note_required"
    stale = crashable.decide(
        {**run, "version": run["version"] - 1}, "confirmed_completed", note="bank shows one payment"
    )
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "stale_version"
    facts = stale.json()["error"]  # the refusal carries what the client needs to refresh
    assert (facts["current_version"], facts["status"]) == (run["version"], "needs_attention")
    assert (facts["version"], facts["run_id"]) == (run["version"] - 1, run["run_id"])

    decided = crashable.decide(run, "confirmed_completed", note="bank shows one payment")
    assert decided.status_code == 200, decided.text
    assert decided.json()["applied"] is True
    done = crashable.wait_status(run["run_id"], "completed")
    assert [d["decision"] for d in done["decisions"]] == ["confirmed_completed"]
    assert model_server.calls == 2  # the first reply was reused, one new call after the note
    assert "bank shows one payment" in request_text(model_server.requests[1])
    again = crashable.server.api_message(
        "pay the bill", input_id="pay", context_id=run["context_id"]
    )
    assert again.json()["response"] == "paid once"
    assert side_effects(crashable.usr) == ["pay-1"]
    crashable.stop()


@pytest.mark.parametrize(
    ("decision", "note", "status", "effects"),
    [
        ("stop", None, "stopped", ["pay-1"]),
        ("new_attempt", None, "completed", ["pay-1", "pay-1"]),
        ("confirmed_not_completed", "no payment at the bank", "completed", ["pay-1", "pay-1"]),
        ("resume", None, "completed", ["pay-1"]),
    ],
)
def test_every_decision_on_a_held_side_effect(
    crashable, model_server, decision, note, status, effects
):
    install_side_effect_tool(crashable.usr)
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.respond_with(lambda body: {"tool_name": "response", "tool_args": {"text": "ok"}})
    crashable.crash_during("pay the bill", "pay", **_crash_env("after_effect", "side_effect"))
    crashable.start()
    run = crashable.only_run()
    assert run["status"] == "needs_attention"

    extra = {"note": note} if note else {}
    response = crashable.decide(run, decision, **extra)
    assert response.status_code == 200, response.text

    final = crashable.wait_status(run["run_id"], status)
    # a person chose to run it again (new_attempt / confirmed_not_completed): allowed repeats
    assert side_effects(crashable.usr) == effects
    if decision == "resume":
        abandoned = [c for c in final["calls"] if c["name"] == "side_effect"]
        assert abandoned[0]["status"] == "abandoned"
    crashable.stop()


def test_committed_model_result_is_reused_after_a_crash(crashable, model_server):
    model_server.tool("response", {"text": "answer from the only model call"})
    crashable.crash_during("question", "q-1", **_crash_env("after_result", "model"))
    assert model_server.calls == 1

    crashable.start()
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed")
    assert model_server.calls == 1  # the committed reply was reused, not asked again
    again = crashable.server.api_message("question", input_id="q-1", context_id=done["context_id"])
    assert again.json() == {
        "context_id": done["context_id"],
        "run_id": done["run_id"],
        "input_id": "q-1",
        "status": "completed",
        "response": "answer from the only model call",
    }
    crashable.stop()


def test_code_execution_killed_after_intent_runs_once_after_restart(
    crashable, model_server, tmp_path
):
    out = tmp_path / "shell_effects.txt"
    code = f"echo ran >> {out} && echo OUTPUT-MARK-1"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "shell done"})
    crashable.crash_during("run it", "sh-1", **_crash_env("after_intent", "code_execution_tool"))
    assert not out.exists()  # the effect had not started

    crashable.start()
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed")
    assert out.read_text().splitlines() == ["ran"]
    assert model_server.calls == 2
    assert "OUTPUT-MARK-1" in request_text(model_server.requests[1])
    shell = [c for c in done["calls"] if c["name"] == "code_execution_tool"]
    assert shell[-1]["replay_policy"] == "adapter:shell" and shell[-1]["committed"]
    crashable.stop()


def test_shell_command_outlives_the_server_and_its_receipt_is_reused(
    crashable, model_server, tmp_path
):
    out = tmp_path / "shell_effects.txt"
    gate = tmp_path / "gate"
    code = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo ran >> {out} && echo OUTPUT-MARK-2"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "shell done"})
    server = crashable.start()
    receipts = crashable.usr / "durability" / "receipts"
    sender = threading.Thread(
        target=lambda: _quietly(lambda: server.api_message("run it", input_id="sh-2")),
        daemon=True,
    )
    sender.start()
    wait_until(lambda: list(receipts.glob("*.start")), what="the shell's start marker")
    crashable.kill()  # SIGKILL the server alone: the shell session lives on
    sender.join(30)
    gate.touch()
    wait_until(lambda: list(receipts.glob("*.exit")), what="the shell's exit marker")

    crashable.start()
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed")
    assert out.read_text().splitlines() == ["ran"]  # ran once, proven by the receipt
    assert model_server.calls == 2
    assert "OUTPUT-MARK-2" in request_text(model_server.requests[1])
    shell = [c for c in done["calls"] if c["name"] == "code_execution_tool"]
    assert len(shell) == 1 and shell[0]["status"] == "completed"
    assert "receipt" in shell[0]["result"]
    crashable.stop()


def test_corrupt_checkpoint_is_held_at_start_up_and_the_chat_refuses_messages(
    crashable, model_server
):
    install_side_effect_tool(crashable.usr)
    model_server.tool("side_effect", {"label": "pay-1"})
    model_server.tool("response", {"text": "never reached"})
    crashable.crash_during("pay", "pay", **_crash_env("after_checkpoint", "side_effect"))
    corrupt_latest_checkpoint(crashable.usr / "durability" / "journal.sqlite")

    crashable.start()
    run = crashable.only_run()
    assert (run["status"], run["reason"]) == ("needs_attention", "corrupt_checkpoint"), run
    refused = crashable.server.api_message("hello?", context_id=run["context_id"])
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_held"
    version = run["version"]
    crashable.stop()

    crashable.start()  # a later restart leaves the held run alone
    assert crashable.run(run["run_id"])["version"] == version
    assert model_server.calls == 1
    assert_no_repeats(side_effects(crashable.usr))
    crashable.stop()


def test_a_start_checkpoint_lost_to_a_sigkill_resumes_from_the_chat_and_the_input(
    crashable, model_server
):
    """The run's start checkpoint waits for the run's first intent to ride on; a SIGKILL
    before that intent loses it. The run resumes from the chat's previous checkpoint plus
    the journaled input: the same history, the model asked once, the answer given."""
    model_server.tool("response", {"text": "first answer"})
    crashable.start()
    first = crashable.server.api_message("first question", input_id="q-1").json()
    assert first["response"] == "first answer", first
    crashable.stop()
    context_id = first["context_id"]

    model_server.tool("response", {"text": "second answer"})
    crashable.crash_during(
        "second question", "q-2", context_id=context_id, **_crash_env("before_intent", "model")
    )
    assert model_server.calls == 1
    with closing(sqlite3.connect(crashable.usr / "durability" / "journal.sqlite")) as db:
        (run_id,) = db.execute("SELECT run_id FROM inputs WHERE input_id = 'q-2'").fetchone()
        lost = db.execute("SELECT count(*) FROM checkpoints WHERE run_id = ?", (run_id,))
        assert lost.fetchone()[0] == 0, "the start checkpoint was parked, not on disk"

    crashable.start()
    done = crashable.wait_status(run_id, "completed")
    assert done["context_id"] == context_id
    assert model_server.calls == 2, "the model is asked once for the resumed run"
    prompt = "\n".join(str(m.get("content")) for m in model_server.requests[-1]["messages"])
    assert prompt.count("first question") == 1 and prompt.count("first answer") == 1
    assert prompt.count("second question") == 1, prompt
    again = crashable.server.api_message("second question", input_id="q-2", context_id=context_id)
    assert again.json()["response"] == "second answer", again.text
    crashable.stop()


def _quietly(fn) -> None:
    try:
        fn()
    except httpx.HTTPError:
        pass
