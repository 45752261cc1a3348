"""browser_agent end to end: a real run_ui.py, a real Chromium, a web site served by the
test (its form counts submissions) and a scripted browser model. Every step is a journaled
child call; a crash in a submit is held with the action log as evidence; reading actions
replay (issue #21)."""

from __future__ import annotations

import httpx
import pytest

from tests.integration._browser_support import ALLOW_PRIVATE, calls_named, script
from tests.integration._durable_system import KEY, crashable
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
    steps_in_order = sorted(
        (c for c in run["calls"] if c["agent_no"] in inner), key=lambda c: c["seq"]
    )
    # the URL named in the task is opened before the browser model is asked
    assert [c["name"] for c in steps_in_order][:2] == ["browser_read", "model"]
    items = chat_log(server, run["context_id"])
    steps = [i for i in items if i["type"] == "browser"]
    assert [i["kvps"]["action"] for i in steps] == ["navigate", "type", "submit"]
    assert all(len(i["kvps"]["screenshot"]) == 64 for i in steps)
    assert steps[-1]["kvps"]["url"] == f"{browser_site.url}/thanks"
    crashable.stop()


def _crash(boundary: str, match: str) -> dict[str, str]:
    return {**ALLOW_PRIVATE, "A0_CRASH_AT": boundary, "A0_CRASH_MATCH": match}


def test_a_crash_inside_submit_is_held_with_the_action_log_and_a_screenshot(
    crashable, model_server, browser_site
):
    task = f"Open {browser_site.url}/form and send it with the name Alice"
    script(model_server, task, FILL_AND_SUBMIT)
    # the second browser_act effect is the submit: the form was sent, its result not journaled
    crashable.crash_during("send the order", "order-2", **_crash("after_effect@2", "browser_act"))
    assert browser_site.count == 1

    crashable.start(**ALLOW_PRIVATE)
    run = crashable.only_run()
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call")
    log = [(c["name"], c["status"]) for c in run["calls"] if c["name"].startswith("browser_")]
    assert log == [
        ("browser_agent", "open"),
        ("browser_read", "completed"),
        ("browser_act", "completed"),
        ("browser_act", "open"),
    ]
    submit = calls_named(run, "browser_act")[-1]
    assert '"method": "submit"' in submit["args"] and not submit["committed"]
    evidence = submit["evidence"]
    assert evidence["url"] == f"{browser_site.url}/form"
    assert evidence["title"] == "Order form" and evidence["action"] == "submit"
    shot = httpx.get(crashable.server.url + evidence["screenshot_url"], headers=KEY, timeout=30)
    assert shot.status_code == 200 and shot.headers["content-type"] == "image/jpeg"
    assert shot.content[:3] == b"\xff\xd8\xff"  # a JPEG

    decided = crashable.decide(run, "confirmed_completed", note="the shop shows one order")
    assert decided.status_code == 200, decided.text
    done = crashable.wait_status(run["run_id"], "completed", timeout=180)
    assert browser_site.count == 1  # continued from the log: no second submission
    statuses = [c["status"] for c in calls_named(done, "browser_act")]
    assert statuses[:2] == ["completed", "completed"]
    crashable.stop()


def test_a_crash_during_reading_actions_resumes_without_a_hold(
    crashable, model_server, browser_site
):
    task = f"Open {browser_site.url}/form, read it, then send it with the name Bob"
    plan = [
        {"action": "extract"},
        {"action": "type", "index": 0, "text": "Bob"},
        {"action": "submit", "index": 0},
        {"action": "done", "response": "sent"},
    ]
    script(model_server, task, plan)
    # the second reading action (extract) ran, its result not journaled
    crashable.crash_during("read and send", "order-3", **_crash("after_effect@2", "browser_read"))
    assert browser_site.count == 0

    crashable.start(**ALLOW_PRIVATE)
    run = crashable.runs()[0]
    done = crashable.wait_status(run["run_id"], "completed", timeout=180)
    assert done["decisions"] == [] and done["reason"] in (None, "")
    assert browser_site.count == 1 and browser_site.submissions[0] == {"name": ["Bob"]}
    reads = calls_named(done, "browser_read")
    assert ['"method": "navigate"' in reads[0]["args"], '"method": "extract"' in reads[1]["args"]]
    assert len(reads) == 2
    assert all(c["status"] == "completed" for c in reads)
    crashable.stop()
