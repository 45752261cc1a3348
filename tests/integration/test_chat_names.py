"""Chat names as people see them (#23 point 4): the utility model names a chat after its first
exchange through the journaled model seam; the name is stored in the journal and survives
SIGKILL; a crash right after the naming call reuses the recorded title."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration._durable_system import crashable
from tests.integration._helpers import wait_until

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

RENAME_ON = {"A0_SET_chat_rename": "true"}
TITLE_PROMPT = "short title for a chat list"  # prompts/fw.rename_chat.sys.md


def _title_requests(model_server) -> list[dict]:
    return [r for r in model_server.requests if TITLE_PROMPT in str(r["messages"][0]["content"])]


def _answer(text: str) -> dict[str, Any]:
    return {
        "thoughts": ["..."],
        "headline": "",
        "tool_name": "response",
        "tool_args": {"text": text},
    }


def _responder(titles: list[str]):
    """The rename prompt gets the next title; any other call gets an answer."""

    def respond(body: dict) -> Any:
        system = str(body["messages"][0].get("content", ""))
        if TITLE_PROMPT in system:
            return titles.pop(0) if titles else "Unused title"
        return _answer("Paris is the capital.")

    return respond


def _names(harness) -> dict[str, str]:
    assert harness.server is not None
    with harness.server.ui_client() as client:
        rows = client.post("/api/poll", json={}).json()["contexts"]
    return {row["id"]: row["name"] for row in rows}


def test_the_utility_model_names_the_chat_once_and_the_name_survives_sigkill(
    crashable, model_server
):
    model_server.respond_with(_responder(['  "French capital"  ', "Another title"]))
    server = crashable.start(**RENAME_ON)
    first = server.api_message("What is the capital of France?").json()
    assert first["response"] == "Paris is the capital.", first
    context_id = first["context_id"]
    assert _names(crashable)[context_id] == "French capital"
    rename_calls = _title_requests(model_server)
    assert len(rename_calls) == 1
    assert "What is the capital of France?" in str(rename_calls[0]["messages"][-1]["content"])
    # journaled: the run's calls end with the utility model call that named it
    run = crashable.run(first["run_id"])
    assert [c["kind"] for c in run["calls"]][-1] == "model"
    assert '"kind": "utility"' in run["calls"][-1]["args"]

    # a second exchange does not ask again (named after the first exchange only)
    second = server.api_message("And of Italy?", context_id=context_id).json()
    assert second["status"] == "completed", second
    assert len(_title_requests(model_server)) == 1

    crashable.kill()  # SIGKILL: the name is in the journal, not in memory
    crashable.start(**RENAME_ON)
    assert _names(crashable)[context_id] == "French capital"
    crashable.stop()


def test_a_crash_after_the_naming_call_reuses_the_recorded_title(crashable, model_server):
    model_server.respond_with(_responder(["Weather report", "Should not be asked"]))
    env = {**RENAME_ON, "A0_CRASH_AT": "after_result@2", "A0_CRASH_MATCH": "model"}
    crashable.crash_during("What is the weather?", "in-1", **env)  # killed after the title
    asked = len(model_server.requests)
    crashable.start(**RENAME_ON)
    run = crashable.wait_status(crashable.only_run()["run_id"], "completed")
    names = wait_until(lambda: _names(crashable) or None, what="the rebuilt chat")
    assert names[run["context_id"]] == "Weather report"
    assert len(model_server.requests) == asked  # nothing asked again: reused from the journal
    crashable.stop()
