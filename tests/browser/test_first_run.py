"""The operator's first hour (#23), seams side, in a real browser: a fresh usr with no API
key says so at the top, the first message fails with guidance and a way to Settings (no
hold) and, once the key is saved, the next one is answered; a held model call offers only
the decisions that fit and is retried from the panel with a count; decided runs are kept."""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import Page, expect

from tests.integration._durable_system import crashable
from tests.integration._helpers import wait_until
from tests.support.model_server import ScriptedFailure
from tests.support.ui_server import SLOW_START

pytestmark = pytest.mark.browser

__all__ = ["crashable"]  # the fixture

TIMEOUT_MS = 60_000


def test_a_fresh_install_without_a_key_guides_to_settings_and_holds_nothing(
    page: Page, ui_server, model_server
):
    ui_server.env.update({"A0_SET_mcp_server_token": "test-token"})  # nothing else: fresh
    ui_server.start(timeout=SLOW_START)
    page.goto(ui_server.url)
    banner = page.get_by_test_id("model-banner")
    expect(banner).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("model-problem")).to_contain_text("API key")

    page.get_by_test_id("send-input").fill("hello")
    page.get_by_test_id("send-button").click()
    guide = page.get_by_test_id("model-guide")
    expect(guide).to_be_visible(timeout=TIMEOUT_MS)
    expect(guide).to_contain_text("API_KEY_OPENAI")
    error = page.get_by_test_id("log-error")
    expect(error).to_contain_text("no API key")
    expect(page.get_by_test_id("held-banner")).to_be_hidden()
    expect(page.get_by_test_id("chat-held")).to_have_count(0)
    expect(page.get_by_test_id("chat-status")).to_have_text("idle", timeout=TIMEOUT_MS)
    assert model_server.calls == 0

    guide.get_by_test_id("guide-settings").click()
    dialog = page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    dialog.get_by_test_id("api-key-openai").fill("sk-test-key")
    dialog.get_by_test_id("chat_model_api_base").fill(model_server.url)
    dialog.get_by_test_id("util_model_api_base").fill(model_server.url)
    dialog.get_by_test_id("settings-save").click()
    expect(dialog).to_be_hidden(timeout=TIMEOUT_MS)
    expect(banner).to_be_hidden(timeout=TIMEOUT_MS)

    model_server.tool("response", {"text": "Hello, configured world."})
    page.get_by_test_id("send-input").fill("hello again")
    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("log-response")).to_contain_text(
        "Hello, configured world.", timeout=TIMEOUT_MS
    )
    expect(page.get_by_test_id("held-banner")).to_be_hidden()


def test_a_held_model_call_offers_only_what_fits_and_retry_from_the_panel(
    page: Page, running_ui, model_server
):
    provider_up = threading.Event()

    def provider(body: dict):
        if not provider_up.is_set():
            return ScriptedFailure(500, "provider down")
        return {"tool_name": "response", "tool_args": {"text": "back after the retry"}}

    model_server.respond_with(provider)
    held = running_ui.api_message("hello", input_id="held-1").json()
    assert held["status"] == "needs_attention", held
    run = _run(running_ui, held["run_id"])
    fits = {f["decision"]: f for f in run["decisions_available"]}
    assert {d for d, f in fits.items() if f["allowed"]} == {"retry_model_call", "stop"}
    assert "fail again" in fits["resume"]["why"]

    page.goto(running_ui.url)
    page.get_by_test_id("recovery-open").click()
    card = page.get_by_test_id("recovery-run")
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    options = card.locator("[data-testid^='decision-'] input[type=radio]")
    expect(options).to_have_count(2)
    for refused in ("resume", "new_attempt", "confirmed_completed", "confirmed_not_completed"):
        expect(card.get_by_test_id(f"decision-{refused}")).to_have_count(0)
    provider_up.set()
    card.get_by_test_id("decision-retry_model_call").click()
    card.get_by_test_id("decision-attempts").fill("3")
    card.get_by_test_id("decision-note").fill("provider is back")
    card.get_by_test_id("decision-submit").click()
    expect(page.get_by_test_id("recovery-message")).to_contain_text("recorded")
    expect(page.get_by_test_id("recovery-empty")).to_be_visible(timeout=TIMEOUT_MS)
    history = page.get_by_test_id("history-run")
    expect(history).to_have_count(1, timeout=TIMEOUT_MS)
    expect(history).to_contain_text("retry_model_call")
    expect(history).to_contain_text("provider is back")

    def completed():
        row = _run(running_ui, held["run_id"])
        return row if row["status"] == "completed" else None

    done = wait_until(completed, what="the retried run to complete")
    assert [(c["attempt"], c["status"]) for c in done["calls"]][:2] == [
        (1, "superseded"),
        (2, "completed"),
    ]
    assert [(d["decision"], d["note"]) for d in done["decisions"]] == [
        ("retry_model_call", "provider is back")
    ]
    page.get_by_test_id("recovery-refresh").click()
    expect(history).to_contain_text("now completed", timeout=TIMEOUT_MS)


def _run(server, run_id: str) -> dict:
    with server.ui_client() as client:
        response = client.post("/api/durable_run", json={"run_id": run_id})
        assert response.status_code == 200, response.text
        return response.json()["run"]


def test_chat_names_survive_sigkill_and_restart(page: Page, crashable, model_server):
    def respond(body: dict):  # the third chat's run is held: start-up rebuilds it first
        if "third chat" in str(body["messages"][-1]["content"]):
            return ScriptedFailure(400, "refused")
        return {"tool_name": "response", "tool_args": {"text": "ok"}}

    model_server.respond_with(respond)
    server = crashable.start()
    first = server.api_message("first chat").json()["context_id"]
    page.goto(server.url)
    page.get_by_test_id("new-chat").click()  # a chat made without a message
    expect(page.get_by_test_id("chat-item")).to_have_count(2, timeout=TIMEOUT_MS)
    held = server.api_message("third chat").json()
    assert held["status"] == "needs_attention", held
    third = held["context_id"]
    task = crashable.post(
        "scheduler_task_create",
        {"name": "nightly report", "prompt": "Report.", "schedule": "0 3 * * *"},
    ).json()["task"]
    ran = crashable.post("scheduler_task_run", {"uuid": task["uuid"]})
    assert ran.status_code == 200, ran.text
    expect(page.get_by_test_id("chat-item")).to_have_count(4, timeout=TIMEOUT_MS)

    def names() -> dict[str, str]:
        items = page.get_by_test_id("chat-item")
        expect(items).to_have_count(4, timeout=TIMEOUT_MS)
        return {
            items.nth(i).get_attribute("data-ctxid"): items.nth(i).inner_text().strip()
            for i in range(items.count())
        }

    before = names()
    assert before[task["context_id"]].startswith("nightly report"), before
    assert len(set(before.values())) == 4, before  # four different names
    assert before[first] != before[third]

    crashable.kill()  # SIGKILL
    server = crashable.start()
    page.goto(server.url)
    assert names() == before
