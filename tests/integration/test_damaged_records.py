"""Damaged committed records (issue #7, point 2), against real run_ui.py processes.

A run is crashed right after a committed result; between the two server lives the test
changes the stored row in the SQLite file. The restarted server must never use the damaged
value: the run is held with reason ``corrupt_record`` naming the record, the chat warns,
durable_run shows it, and the decisions lead on.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import chat_log, log_text

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

ANSWER = "the committed answer"


def _db(crashable) -> Path:
    return crashable.usr / "durability" / "journal.sqlite"


def _model_call(db_path: Path) -> tuple[str, str]:
    with closing(sqlite3.connect(db_path)) as db:
        row = db.execute(
            "SELECT id, result FROM calls WHERE name = 'model' AND state = 'completed'"
            " ORDER BY rowid LIMIT 1"
        ).fetchone()
    assert row is not None, "no committed model call"
    return str(row[0]), str(row[1])


def _set_result(db_path: Path, call_id: str, text: str) -> None:
    with closing(sqlite3.connect(db_path)) as db:
        db.execute("UPDATE calls SET result = ? WHERE id = ?", (text, call_id))
        db.commit()


def _crash_after_committed_reply(crashable, model_server) -> str:
    model_server.tool("response", {"text": ANSWER})
    model_server.respond_with(
        lambda body: {"tool_name": "response", "tool_args": {"text": "asked again"}}
    )
    env = {"A0_CRASH_AT": "after_result", "A0_CRASH_MATCH": "model"}
    crashable.crash_during("question", "q-1", **env)
    assert model_server.calls == 1
    call_id, _ = _model_call(_db(crashable))
    return call_id


def _assert_held_for(crashable, call_id: str, reason: str) -> dict:
    run = crashable.only_run()
    assert (run["status"], run["reason"]) == ("needs_attention", "corrupt_record"), run
    detail = run["reason_detail"]
    assert detail["record"] == "call_result" and detail["reason"] == reason, detail
    assert detail["call_id"] == call_id and detail["run_id"] == run["run_id"], detail
    assert (detail["agent_no"], detail["seq"]) == (0, 0), detail
    damaged = [c for c in run["calls"] if c["call_id"] == call_id]
    assert damaged and damaged[0]["damaged"] == f"call_result:{reason}", damaged
    text = log_text(chat_log(crashable.server, run["context_id"]))
    assert "damaged" in text and call_id in text, text[-2000:]
    return run


def _assert_shown_damaged(crashable, run: dict, reason: str) -> None:
    """The rebuilt chat shows the damaged step as damaged (issue #17, point 11): a marker
    in place of the step, never the stored text (forged or cut)."""
    items = chat_log(crashable.server, run["context_id"])
    text = log_text(items)
    assert "a forged answer" not in text, text[-2000:]
    assert ANSWER not in text, text[-2000:]  # the cut text still held it
    assert f"[damaged record: {reason}]" in text, text[-2000:]


def test_changed_result_is_never_reused(crashable, model_server):
    call_id = _crash_after_committed_reply(crashable, model_server)
    _, stored = _model_call(_db(crashable))
    assert ANSWER in stored
    _set_result(_db(crashable), call_id, stored.replace(ANSWER, "a forged answer"))

    crashable.start()
    run = _assert_held_for(crashable, call_id, "digest_mismatch")
    assert model_server.calls == 1  # nothing was asked, nothing reused
    _assert_shown_damaged(crashable, run, "digest mismatch")
    refused = crashable.server.api_message("hello?", context_id=run["context_id"])
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "run_held"

    # resume: the damaged reply is set aside (abandoned) and the model is asked again
    decided = crashable.decide(run, "resume")
    assert decided.status_code == 200, decided.text
    done = crashable.wait_status(run["run_id"], "completed")
    assert model_server.calls == 2
    again = crashable.server.api_message("question", input_id="q-1", context_id=run["context_id"])
    assert again.json()["response"] == "asked again"
    assert "a forged answer" not in json.dumps(done)
    crashable.stop()


def test_truncated_result_holds_the_run_and_the_server_starts(crashable, model_server):
    call_id = _crash_after_committed_reply(crashable, model_server)
    _, stored = _model_call(_db(crashable))
    _set_result(_db(crashable), call_id, stored[: len(stored) // 2])

    crashable.start()  # before the fix the server exited here
    run = _assert_held_for(crashable, call_id, "undecodable")
    _assert_shown_damaged(crashable, run, "undecodable")
    decided = crashable.decide(run, "stop")
    assert decided.status_code == 200, decided.text
    crashable.wait_status(run["run_id"], "stopped")
    crashable.stop()
