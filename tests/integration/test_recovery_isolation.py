"""One bad run never takes the others down (issue #7, point 3), with real run_ui.py processes.

Four chats each finish a turn; with the server down, each gets a second input admitted but
not yet started (a crash right after admission), and two of them a checkpoint that cannot be
rebuilt (valid digest, nonsense content): one breaks the chat's rebuild, one the run's resume
base. The restarted server must start, finish the two healthy runs, and hold the two broken
ones (recovery_error) for a decision.
"""

from __future__ import annotations

import re

import pytest

from durability import CheckpointData, Journal, digest
from tests.integration._durable_system import crashable
from tests.integration._helpers import chat_log, log_text, request_text

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

MARKER = re.compile(r"TASK-[A-Z]-\d")
BROKEN_CHAIN = {"agents": [{"number": "zero"}]}  # int("zero") fails while rebuilding


def answer_by_marker(body: dict) -> dict:
    found = MARKER.findall(request_text(body))
    return {"tool_name": "response", "tool_args": {"text": f"done {found[-1]}"}}


def admit_unstarted(journal: Journal, context_id: str, input_id: str, text: str):
    payload = {"message": text, "attachments": [], "system_message": []}
    return journal.admit(context_id, input_id, digest(payload), message=payload).run


def test_one_broken_run_is_held_and_the_others_recover(crashable, model_server):
    model_server.respond_with(answer_by_marker)
    server = crashable.start()
    chats = {}
    for name in "ABCD":
        first = server.api_message(f"first TASK-{name}-1", input_id=f"{name}-1")
        assert first.status_code == 200 and first.json()["response"] == f"done TASK-{name}-1"
        chats[name] = first.json()["context_id"]
    crashable.stop()

    with Journal.open_sqlite(crashable.usr / "durability" / "journal.sqlite") as journal:
        runs = {
            name: admit_unstarted(journal, chats[name], f"{name}-2", f"second TASK-{name}-2")
            for name in "ABCD"
        }
        journal.write_checkpoint(  # C: the chat itself cannot be rebuilt
            runs["C"].id, CheckpointData(state={"current": BROKEN_CHAIN, "resume": BROKEN_CHAIN})
        )
        resume_base = {**BROKEN_CHAIN, "phase": "iteration"}
        journal.write_checkpoint(  # D: the chat rebuilds, the run's resume base does not
            runs["D"].id, CheckpointData(state={"current": {}, "resume": resume_base})
        )

    server = crashable.start()  # before the fix, start-up failed on chat C
    for name in "AB":
        crashable.wait_status(runs[name].id, "completed")
        again = server.api_message(
            f"second TASK-{name}-2", input_id=f"{name}-2", context_id=chats[name]
        )
        assert again.json()["response"] == f"done TASK-{name}-2", again.text
    held = {}
    for name, stage in (("C", "restore"), ("D", "resume")):
        run = crashable.wait_status(runs[name].id, "needs_attention")
        assert run["reason"] == "recovery_error", run
        detail = run["reason_detail"]
        assert (detail["stage"], detail["type"]) == (stage, "ValueError"), detail
        assert "Traceback" not in str(detail)
        warning = log_text(chat_log(server, chats[name]))
        assert "recovery_error" in warning, warning[-1500:]
        refused = server.api_message("hello?", context_id=chats[name])
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_held"
        held[name] = run

    for name in "CD":  # decidable: stop, then the chat takes new work again
        decided = crashable.decide(held[name], "stop")
        assert decided.status_code == 200, decided.text
        crashable.wait_status(runs[name].id, "stopped")
        third = {"input_id": f"{name}-3", "context_id": chats[name]}
        fresh = server.api_message(f"third TASK-{name}-3", **third)
        assert fresh.json()["response"] == f"done TASK-{name}-3", fresh.text
    crashable.stop()
