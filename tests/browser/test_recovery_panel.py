"""The Recovery panel in a real browser: a held run, its calls, a stale decision, a decision."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.integration._durable_system import crashable
from tests.support.model_server import ScriptedFailure

pytestmark = pytest.mark.browser

__all__ = ["crashable"]  # the fixture

TIMEOUT_MS = 60_000
KEY = {"X-API-KEY": "test-token"}
# a model_failed hold offers what fits it (#23): Retry model call and Stop
DECISION_WORDS = {
    "retry_model_call": "Call the model again",
    "stop": "End the run",
}
NOT_OFFERED = ("resume", "new_attempt", "confirmed_completed", "confirmed_not_completed")


def test_held_run_banner_panel_stale_refresh_and_decision(page: Page, running_ui, model_server):
    model_server.respond_with(lambda body: ScriptedFailure(500, "provider down"))
    held = running_ui.api_message("hello", input_id="held-1").json()
    assert held["status"] == "needs_attention", held
    run_id = held["run_id"]

    page.goto(running_ui.url)
    page.get_by_test_id("chat-item").first.click()
    banner = page.get_by_test_id("held-banner")
    expect(banner).to_be_visible(timeout=TIMEOUT_MS)
    expect(banner).to_contain_text("model_failed")
    expect(page.get_by_test_id("recovery-badge")).to_have_text("1")

    page.get_by_test_id("held-open").click()
    dialog = page.get_by_test_id("recovery-dialog")
    expect(dialog).to_contain_text("Continue with confidence")
    card = dialog.get_by_test_id("recovery-run")
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    expect(card.get_by_test_id("run-reason")).to_contain_text("model_failed")
    expect(card.get_by_test_id("run-phase")).to_have_text("result_committed")
    expect(card.get_by_test_id("recovery-call")).to_have_count(1)
    expect(card.get_by_test_id("recovery-call")).to_contain_text("model")
    expect(card.get_by_test_id("reason-text")).to_contain_text("model provider failed")
    expect(card.get_by_test_id("reason-detail")).to_contain_text("provider down")
    expect(card.get_by_test_id("timeline-step")).to_have_count(1)
    expect(card.get_by_test_id("decision-history")).to_have_text("None yet.")
    # the decisions that fit are readable in full, each with its explanation, none cut off
    for name, words in DECISION_WORDS.items():
        option = card.get_by_test_id(f"decision-{name}")
        expect(option).to_be_visible()
        expect(option).to_contain_text(words)
        box = option.bounding_box()
        assert box is not None and box["width"] > 300, (name, box)
    # the others are not offered, each with the server's reason
    for name in NOT_OFFERED:
        expect(card.get_by_test_id(f"decision-{name}")).to_have_count(0)
    card.get_by_test_id("decision-unavailable").locator("summary").click()
    expect(card.get_by_test_id("unavailable-resume")).to_contain_text("fail again")

    # no decision chosen: the panel says so
    card.get_by_test_id("decision-submit").click()
    expect(page.get_by_test_id("recovery-message")).to_contain_text("Choose one")

    # someone else acts meanwhile: a retry grant resumes the run, it fails and holds again
    version = _run(running_ui, run_id)["version"]
    grant = {"run_id": run_id, "attempts": 1}
    url = f"{running_ui.url}/api/durable_retry_grant"
    granted = httpx.post(url, json=grant, headers=KEY, timeout=30)
    assert granted.status_code == 200, granted.text
    _wait_held_beyond(running_ui, run_id, version)

    card.get_by_test_id("decision-stop").click()
    card.get_by_test_id("decision-submit").click()
    expect(page.get_by_test_id("recovery-message")).to_contain_text("refreshed")
    changes = page.get_by_test_id("stale-changes")
    expect(changes).to_contain_text(f"version {version}")
    expect(changes).to_contain_text("(attempt 2) is now failed")  # the granted retry
    card = dialog.get_by_test_id("recovery-run")
    expect(card.get_by_test_id("recovery-call")).to_have_count(2)  # both attempts are listed
    card.get_by_test_id("decision-stop").click()
    card.get_by_test_id("decision-note").fill("provider is down for the day")
    card.get_by_test_id("decision-submit").click()
    expect(page.get_by_test_id("recovery-message")).to_contain_text("recorded")
    expect(dialog.get_by_test_id("recovery-empty")).to_be_visible(timeout=TIMEOUT_MS)
    assert _run(running_ui, run_id)["status"] == "stopped"

    dialog.get_by_test_id("recovery-close").click()
    expect(banner).to_be_hidden(timeout=TIMEOUT_MS)


def _run(server, run_id: str) -> dict:
    response = httpx.post(
        f"{server.url}/api/durable_run", json={"run_id": run_id}, headers=KEY, timeout=30
    )
    assert response.status_code == 200, response.text
    return response.json()["run"]


def _wait_held_beyond(server, run_id: str, version: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run = _run(server, run_id)
        if run["status"] == "needs_attention" and run["version"] > version:
            return
        time.sleep(0.05)  # polling interval of a deadline wait
    raise AssertionError("the run did not hold again after the retry grant")


def test_a_damaged_record_is_named_in_the_panel_and_decided(page: Page, crashable, model_server):
    model_server.tool("response", {"text": "the committed answer"})
    model_server.respond_with(
        lambda body: {"tool_name": "response", "tool_args": {"text": "again"}}
    )
    env = {"A0_CRASH_AT": "after_result", "A0_CRASH_MATCH": "model"}
    crashable.crash_during("question", "q-1", **env)
    db = crashable.usr / "durability" / "journal.sqlite"
    with closing(sqlite3.connect(db)) as conn, conn:
        call_id, result = conn.execute(
            "SELECT id, result FROM calls WHERE name = 'model'"
        ).fetchone()
        forged = result.replace("the committed answer", "a forged answer")
        conn.execute("UPDATE calls SET result = ? WHERE id = ?", (forged, call_id))
    server = crashable.start()

    page.goto(server.url)
    page.get_by_test_id("chat-item").first.click()
    expect(page.get_by_test_id("held-banner")).to_contain_text("corrupt_record", timeout=TIMEOUT_MS)
    page.get_by_test_id("held-open").click()
    card = page.get_by_test_id("recovery-dialog").get_by_test_id("recovery-run")
    expect(card.get_by_test_id("run-reason")).to_contain_text("corrupt_record")
    detail = card.get_by_test_id("run-detail")
    expect(detail).to_contain_text(f"call_result of call {call_id}")
    expect(detail).to_contain_text("digest_mismatch")
    expect(card.get_by_test_id("recovery-call")).to_contain_text("damaged: call_result")

    card.get_by_test_id("decision-resume").click()
    card.get_by_test_id("decision-submit").click()
    expect(page.get_by_test_id("recovery-message")).to_contain_text("recorded")
    run_id = crashable.only_run()["run_id"]
    assert crashable.wait_status(run_id, "completed")["status"] == "completed"
    crashable.stop()
