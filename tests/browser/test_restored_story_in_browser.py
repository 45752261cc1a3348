"""The whole story after a restart in the real UI (issue #11, point 2): a run killed (SIGKILL)
right after journaling its second side effect is restarted; the chat shows the step the
checkpoint did not hold with a "restored from journal" badge and the uncertain call with
its own marker; after a decision in the Recovery panel every step is shown once."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.integration._durable_system import crashable as crashable
from tests.integration._durable_system import install_side_effect_tool, side_effects

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def test_a_restarted_chat_marks_restored_steps_and_the_uncertain_call(
    page: Page, crashable, model_server
):
    install_side_effect_tool(crashable.usr)
    model_server.tool("side_effect", {"label": "one"}, headline="First payment")
    model_server.tool("side_effect", {"label": "two"}, headline="Second payment")
    model_server.tool("response", {"text": "Both payments **sent**."}, headline="Reporting")
    crash = {"A0_CRASH_AT": "after_intent@2", "A0_CRASH_MATCH": "side_effect"}
    crashable.crash_during("pay both bills", "bills", **crash)
    server = crashable.start()
    run = crashable.only_run()
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call"), run

    page.goto(server.url)
    page.get_by_test_id("chat-item").first.click()
    expect(page.get_by_test_id("held-banner")).to_be_visible(timeout=TIMEOUT_MS)
    messages = page.locator("#messages")
    # the step after the last checkpoint, rebuilt from the journal, with its badge
    second = messages.locator(".msg.agent", has_text="Second payment")
    expect(second).to_have_count(1)
    expect(second.get_by_test_id("restored-badge")).to_have_text("restored from journal")
    # the call whose outcome is unknown: its own marker, not the restored badge
    uncertain = messages.locator(".msg.tool[data-restored=uncertain]")
    expect(uncertain).to_have_count(1)
    expect(uncertain).to_contain_text("two")
    expect(uncertain.get_by_test_id("uncertain-badge")).to_have_text("uncertain: awaiting decision")
    expect(uncertain.get_by_test_id("restored-badge")).to_have_count(0)
    # the steps the checkpoint held are shown as they were, without a badge
    first = messages.locator(".msg.agent", has_text="First payment")
    expect(first).to_have_count(1)
    expect(first.get_by_test_id("restored-badge")).to_have_count(0)
    expect(messages.get_by_test_id("restored-badge")).to_have_count(1)

    page.get_by_test_id("held-open").click()
    card = page.get_by_test_id("recovery-run")
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    card.get_by_test_id("decision-confirmed_completed").click()
    card.get_by_test_id("decision-note").fill("the bank shows the second payment")
    card.get_by_test_id("decision-submit").click()
    expect(page.get_by_test_id("recovery-empty")).to_be_visible(timeout=TIMEOUT_MS)
    crashable.wait_status(run["run_id"], "completed")
    page.get_by_test_id("recovery-close").click()

    # resumed: every step once; the decided call's outcome comes from the journal
    answer = messages.get_by_test_id("log-response")
    expect(answer).to_have_count(1, timeout=TIMEOUT_MS)
    expect(answer.locator("strong")).to_have_text("sent")
    expect(messages.locator(".msg.agent", has_text="First payment")).to_have_count(1)
    expect(messages.locator(".msg.agent", has_text="Second payment")).to_have_count(1)
    expect(messages.get_by_test_id("uncertain-badge")).to_have_count(0)
    decided = messages.locator(".msg.tool", has_text="the bank shows the second payment")
    expect(decided).to_have_count(1)
    expect(decided.get_by_test_id("restored-badge")).to_be_visible()
    assert side_effects(crashable.usr) == ["one"]
    crashable.stop()
