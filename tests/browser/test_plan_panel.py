"""The Plan panel in a real browser: an edit made while the agent replaces the plan becomes
a conflict, shown side by side, that the person merges in the panel."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000
START = {
    "title": "Trip",
    "items": [
        {"id": "train", "text": "Book the train", "done": False},
        {"id": "pack", "text": "Pack", "done": False},
    ],
}
AGENT = {
    "title": "Trip",
    "items": [*START["items"], {"id": "tickets", "text": "Buy museum tickets", "done": False}],
}


def _plan(client, ctx: str) -> dict:
    response = client.post("/api/durable_plan_get", json={"context_id": ctx})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_plan_edited_while_the_agent_replaces_it_is_merged_in_the_panel(
    page: Page, running_ui, model_server
):
    model_server.tool("response", {"text": "Ready."})
    ctx = running_ui.api_message("hello", input_id="p-1").json()["context_id"]
    with running_ui.ui_client() as client:
        first = {"context_id": ctx, "expected_revision": 0, "plan": START}
        assert client.post("/api/durable_plan_set", json=first).status_code == 200

    page.goto(running_ui.url)
    page.get_by_test_id("chat-item").first.click()
    page.get_by_test_id("plan-open").click()
    dialog = page.get_by_test_id("plan-dialog")
    expect(dialog.get_by_test_id("plan-revision")).to_have_text("1", timeout=TIMEOUT_MS)
    items = dialog.get_by_test_id("plan-item")
    expect(items).to_have_count(2)

    # the person edits (not saved yet) ...
    items.nth(0).get_by_test_id("plan-item-done").check()
    items.nth(1).get_by_test_id("plan-item-text").fill("Pack the bags")

    # ... while the agent replaces the plan on revision 1
    model_server.tool("durable_plan", {"action": "replace", "expected_revision": 1, "plan": AGENT})
    model_server.tool("response", {"text": "Plan updated."})
    done = running_ui.api_message("add the museum", input_id="p-2", context_id=ctx).json()
    assert done["status"] == "completed", done

    dialog.get_by_test_id("plan-save").click()
    expect(dialog.get_by_test_id("plan-message")).to_contain_text("changed while you were editing")
    conflict = dialog.get_by_test_id("plan-conflict")
    expect(conflict).to_have_count(1)
    expect(dialog.get_by_test_id("plan-revision")).to_have_text("2")
    expect(conflict.get_by_test_id("conflict-current")).to_contain_text("Buy museum tickets")
    expect(conflict.get_by_test_id("conflict-proposed")).to_contain_text("Pack the bags")
    expect(conflict.get_by_test_id("conflict-proposed")).not_to_contain_text("museum")

    conflict.get_by_test_id("conflict-merge").click()
    expect(dialog.get_by_test_id("plan-merging")).to_be_visible()
    expect(items).to_have_count(3)
    expect(items.nth(0).get_by_test_id("plan-item-done")).to_be_checked()
    expect(items.nth(1).get_by_test_id("plan-item-text")).to_have_value("Pack the bags")
    expect(items.nth(2).get_by_test_id("plan-item-text")).to_have_value("Buy museum tickets")
    dialog.get_by_test_id("plan-save").click()
    expect(dialog.get_by_test_id("plan-message")).to_contain_text("resolved (merged)")
    expect(dialog.get_by_test_id("plan-revision")).to_have_text("3")
    expect(dialog.get_by_test_id("plan-conflict")).to_have_count(0)

    with running_ui.ui_client() as client:
        plan = _plan(client, ctx)
        every = client.post("/api/durable_conflicts", json={"include_resolved": True}).json()
    assert plan["revision"] == 3 and plan["conflicts"] == []
    assert plan["plan"]["items"] == [
        {"id": "train", "text": "Book the train", "done": True},
        {"id": "pack", "text": "Pack the bags", "done": False},
        {"id": "tickets", "text": "Buy museum tickets", "done": False},
    ]
    assert [(c["actor"], c["resolution"]) for c in every["conflicts"]] == [("user", "merged")]
