"""A real turn through run_ui.py with a tool whose result cannot be journaled: the call is
closed as `result_not_storable`, the agent sees it and answers, the run completes."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.durable.conftest import install_unstorable_tool
from tests.integration._helpers import chat_log, log_text, request_text
from tests.support.ui_server import SLOW_START, ui_env_for

pytestmark = pytest.mark.integration


def test_a_tool_returning_a_set_does_not_end_the_run(ui_server, model_server):
    install_unstorable_tool(ui_server.usr_dir)
    ui_server.env.update(ui_env_for(model_server))
    ui_server.start(timeout=SLOW_START)
    model_server.tool("unstorable", {"kind": "set"})
    model_server.tool("response", {"text": "noted, moving on"})

    answer = ui_server.api_message("call the odd tool", input_id="odd-1")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["status"], body["response"]) == ("completed", "noted, moving on")
    assert "could not be recorded" in request_text(model_server.requests[1])
    run = httpx.post(
        f"{ui_server.url}/api/durable_run",
        json={"run_id": body["run_id"]},
        headers={"X-API-KEY": "test-token"},
        timeout=10,
    ).json()["run"]
    [call] = [c for c in run["calls"] if c["name"] == "unstorable"]
    assert call["status"] == "failed" and call["committed"] is True
    recorded = json.loads(call["result"])
    assert (recorded["error"], recorded["type"]) == ("result_not_storable", "set")
    assert all(c["status"] != "open" for c in run["calls"])
    assert "could not be recorded" in log_text(chat_log(ui_server, body["context_id"]))
    assert (ui_server.usr_dir / "side_effects.log").read_text() == "unstorable:set\n"
    assert ui_server.stop() == 0
