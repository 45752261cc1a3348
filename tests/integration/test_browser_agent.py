"""browser_agent end to end: a real run_ui.py, a real Chromium, a web site served by the
test (its form counts submissions) and a scripted browser model. Every step is a journaled
child call; a crash in a submit is held with the action log as evidence; reading actions
replay (issue #21)."""

from __future__ import annotations

import pytest

from tests.integration._browser_support import ALLOW_PRIVATE, calls_named, script
from tests.integration._durable_system import crashable
from tests.integration._helpers import chat_log
from tests.support.browser_site import browser_site

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

__all__ = ["browser_site", "crashable"]  # the fixtures

FILL_AND_SUBMIT = [
    {"action": "type", "index": 0, "text": "Alice"},
    {"action": "submit", "index": 0},
    {"action": "done", "response": "The order was sent."},
]


def test_a_task_navigates_fills_and_submits_once(crashable, model_server, browser_site):
    task = f"Open {browser_site.url}/form and send it with the name Alice"
    script(model_server, task, FILL_AND_SUBMIT)
    server = crashable.start(**ALLOW_PRIVATE)
    answer = server.api_message("send the order", input_id="order-1")
    assert answer.status_code == 200, answer.text
    assert answer.json()["response"] == "browser task finished"
    assert browser_site.count == 1
    assert browser_site.submissions[0] == {"name": ["Alice"]}

    run = crashable.only_run()
    assert run["status"] == "completed"
    [outer] = calls_named(run, "browser_agent")
    assert outer["replay_policy"] == "child"
    reads = calls_named(run, "browser_read")
    acts = calls_named(run, "browser_act")
    assert [c["replay_policy"] for c in reads] == ["safe_replay"]
    assert [c["replay_policy"] for c in acts] == ["hold", "hold"]
    inner = {c["agent_no"] for c in reads + acts}
    assert len(inner) == 1 and inner != {0}  # the task's own agent number
    items = chat_log(server, run["context_id"])
    steps = [i for i in items if i["type"] == "browser"]
    assert [i["kvps"]["action"] for i in steps] == ["navigate", "type", "submit"]
    assert all(len(i["kvps"]["screenshot"]) == 64 for i in steps)
    assert steps[-1]["kvps"]["url"] == f"{browser_site.url}/thanks"
    crashable.stop()
