"""The Tasks view in a real browser: create a planned task that fires a few seconds later,
run it by hand, open its chat, edit it while an agent's edit lands first, delete it."""

from __future__ import annotations

import datetime as dt

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def _answer(body: dict) -> dict:
    return {
        "thoughts": ["..."],
        "headline": "",
        "tool_name": "response",
        "tool_args": {"text": "hello from the task"},
    }


def _list(client) -> dict:
    response = client.post("/api/scheduler_tasks_list", json={})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_task_made_in_the_view_fires_runs_and_is_edited_without_losing_an_edit(
    page: Page, running_ui, model_server
):
    model_server.respond_with(_answer)
    with running_ui.ui_client() as client:
        now = _list(client)["now"]
    soon = dt.datetime.fromtimestamp(now + 8, dt.UTC).replace(microsecond=0)

    page.goto(running_ui.url)
    page.get_by_test_id("tasks-open").click()
    dialog = page.get_by_test_id("tasks-dialog")
    expect(dialog.get_by_test_id("tasks-list")).to_contain_text("No tasks yet.")
    dialog.get_by_test_id("tasks-new").click()
    dialog.get_by_test_id("task-name").fill("Greeting")
    dialog.get_by_test_id("task-type").select_option("planned")
    expect(dialog.get_by_test_id("task-cron")).to_be_hidden()
    dialog.get_by_test_id("task-timezone").fill("UTC")
    dialog.get_by_test_id("task-plan").fill(soon.strftime("%Y-%m-%dT%H:%M:%S"))
    dialog.get_by_test_id("task-prompt").fill("Say hello.")
    dialog.get_by_test_id("task-save").click()
    expect(dialog.get_by_test_id("tasks-message")).to_contain_text('"Greeting" created')
    rows = dialog.get_by_test_id("task-row")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("1 planned time(s)")

    # the planned time comes: the firing runs in the task's own chat
    expect(rows.first.get_by_test_id("task-last-status")).to_have_text(
        "completed", timeout=TIMEOUT_MS
    )
    expect(rows.first.get_by_test_id("task-state")).to_have_text("idle")
    expect(rows.first.get_by_test_id("task-next")).to_have_text("-")

    rows.first.get_by_test_id("task-run").click()
    expect(dialog.get_by_test_id("tasks-message")).to_contain_text("started (started)")
    with running_ui.ui_client() as client:
        [task] = _list(client)["tasks"]
        runs = client.post("/api/durable_runs", json={"context_id": task["uuid"]}).json()["runs"]
    assert len(runs) == 2
    inputs = sorted(r["input_id"] for r in runs)
    assert inputs[0] == f"sched:{task['uuid']}:{soon.isoformat()}"  # the planned time
    assert inputs[1].startswith(f"sched:{task['uuid']}:run:")  # Run now
    [by_hand] = [r["run_id"] for r in runs if r["input_id"] == inputs[1]]
    # the row said "completed" before (the planned firing): wait for the run made by hand
    last = rows.first.get_by_test_id("task-last-status")
    expect(last).to_have_attribute("title", f"run {by_hand}", timeout=TIMEOUT_MS)
    expect(last).to_have_text("completed", timeout=TIMEOUT_MS)

    rows.first.get_by_test_id("task-chat").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_test_id("messages")).to_contain_text(
        "hello from the task", timeout=TIMEOUT_MS
    )
    expect(page.get_by_test_id("messages")).to_contain_text("Say hello.")

    # an edit made on revision 1 while an agent (here: the API) saved revision 2 first
    page.get_by_test_id("tasks-open").click()
    rows.first.get_by_test_id("task-edit").click()
    expect(dialog.get_by_test_id("task-revision")).to_have_text("1")
    with running_ui.ui_client() as client:
        other = {"task_id": task["uuid"], "expected_revision": 1, "system_prompt": "Be brief."}
        assert client.post("/api/scheduler_task_update", json=other).status_code == 200
    dialog.get_by_test_id("task-prompt").fill("Say hello twice.")
    dialog.get_by_test_id("task-save").click()
    expect(dialog.get_by_test_id("tasks-message")).to_contain_text("changed elsewhere")
    expect(dialog.get_by_test_id("task-revision")).to_have_text("2")
    expect(dialog.get_by_test_id("task-prompt")).to_have_value("Say hello twice.")
    with running_ui.ui_client() as client:
        assert _list(client)["tasks"][0]["prompt"] == "Say hello."  # nothing was overwritten
    dialog.get_by_test_id("task-save").click()  # the person chooses to replace it
    expect(dialog.get_by_test_id("tasks-message")).to_contain_text("saved (revision 3)")
    with running_ui.ui_client() as client:
        [task] = _list(client)["tasks"]
    assert (task["prompt"], task["revision"]) == ("Say hello twice.", 3)

    rows.first.get_by_test_id("task-delete").click()
    page.get_by_test_id("confirm-ok").click()  # Delete asks first
    expect(dialog.get_by_test_id("tasks-list")).to_contain_text("No tasks yet.")
    with running_ui.ui_client() as client:
        assert _list(client)["tasks"] == []
