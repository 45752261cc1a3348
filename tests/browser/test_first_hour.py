"""The operator's first hour (#23), in a real browser: an error that stays, notifications,
confirmations before destructive buttons, held chats in the list and a run card that names
and links its chat, settings errors in plain words, Escape that asks before dropping edits."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.integration._helpers import wait_until
from tests.support.model_server import ScriptedFailure

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def _polls(page: Page, count: int) -> None:
    """Let ``count`` more polls answer (each could have cleared what the page shows)."""
    for _ in range(count):
        with page.expect_response(lambda r: r.url.endswith("/api/poll"), timeout=TIMEOUT_MS):
            pass


def _history(running_ui) -> list[dict]:
    with running_ui.ui_client() as client:
        response = client.post("/api/notifications_history", json={})
        assert response.status_code == 200, response.text
        return response.json()["notifications"]


def test_a_refused_send_stays_and_the_held_chat_is_marked_and_linked(
    page: Page, running_ui, model_server
):
    model_server.respond_with(lambda body: ScriptedFailure(500, "provider down"))
    held = running_ui.api_message("hello", input_id="held-1").json()
    assert held["status"] == "needs_attention", held

    page.goto(running_ui.url)
    item = page.get_by_test_id("chat-item")
    expect(item).to_have_count(1, timeout=TIMEOUT_MS)
    expect(item.get_by_test_id("chat-held")).to_have_text("held")
    expect(item.get_by_test_id("chat-held")).to_have_attribute("title", re.compile("model_failed"))
    item.click()
    expect(page.get_by_test_id("held-banner")).to_be_visible(timeout=TIMEOUT_MS)
    held_name = page.get_by_test_id("chat-title").inner_text()  # set by the same poll
    assert held_name.startswith("Chat"), held_name

    # sending into the held chat is refused (409 run_held): the error stays through polls
    page.get_by_test_id("send-input").fill("are you there?")
    page.get_by_test_id("send-button").click()
    toast = page.get_by_test_id("toast").filter(has_text="run_held")
    expect(toast).to_be_visible(timeout=TIMEOUT_MS)
    expect(toast).to_have_attribute("data-type", "error")
    _polls(page, 6)
    expect(toast).to_be_visible()
    expect(page.get_by_test_id("notifications-unread")).to_have_text("1")
    # a second refusal replaces it (one error toast, the newest)
    page.get_by_test_id("send-button").click()
    _polls(page, 2)
    expect(page.get_by_test_id("toast").filter(has_text="run_held")).to_have_count(1)
    toast.get_by_test_id("toast-close").click()
    expect(page.get_by_test_id("toast")).to_have_count(0)

    # the run card names the chat and links to it
    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("chat-item")).to_have_count(2, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("held-banner")).to_be_hidden(timeout=TIMEOUT_MS)
    page.get_by_test_id("recovery-open").click()
    card = page.get_by_test_id("recovery-run")
    expect(card).to_have_count(1, timeout=TIMEOUT_MS)
    link = card.get_by_test_id("run-chat-link")
    expect(link).to_have_text(held_name)
    expect(card.locator("header")).not_to_contain_text(held["context_id"])
    link.click()
    expect(page.get_by_test_id("recovery-dialog")).to_be_hidden()
    expect(page.get_by_test_id("chat-title")).to_have_text(held_name, timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("held-banner")).to_be_visible(timeout=TIMEOUT_MS)


def test_notify_user_toasts_with_its_priority_and_the_history_marks_and_clears(
    page: Page, running_ui, model_server
):
    model_server.tool(
        "notify_user",
        {
            "message": "Disk almost full",
            "title": "Careful",
            "type": "warning",
            "detail": "<b>93%</b> used<img src=x onerror=alert(1)>",
            "priority": 20,
            "timeout": 600,
        },
    )
    model_server.tool("response", {"text": "told you"})
    page.goto(running_ui.url)
    expect(page.get_by_test_id("chat-list")).to_be_attached()
    assert running_ui.api_message("check the disk").status_code == 200

    toast = page.get_by_test_id("toast").filter(has_text="Disk almost full")
    expect(toast).to_be_visible(timeout=TIMEOUT_MS)
    expect(toast).to_have_attribute("data-priority", "20")
    expect(toast.get_by_test_id("toast-priority")).to_have_text("high priority")
    expect(toast.get_by_test_id("toast-title")).to_have_text("Careful")
    expect(toast.get_by_test_id("toast-detail").locator("b")).to_have_text("93%")
    expect(toast.locator("[onerror]")).to_have_count(0)  # the detail HTML is sanitised
    expect(page.get_by_test_id("notifications-high")).to_have_text("1 high")

    # a normal notification with a short display time goes by itself and counts as read
    with running_ui.ui_client() as client:
        made = client.post(
            "/api/notification_create",
            json={"message": "Backup finished", "type": "success", "display_time": 1},
        )
        assert made.status_code == 200, made.text
    quick = page.get_by_test_id("toast").filter(has_text="Backup finished")
    expect(quick).to_be_visible(timeout=TIMEOUT_MS)
    expect(quick).to_have_attribute("data-priority", "10")
    expect(quick).to_have_count(0, timeout=TIMEOUT_MS)
    wait_until(
        lambda: (
            [n["read"] for n in _history(running_ui) if n["message"] == "Backup finished"] == [True]
        ),
        what="the timed-out normal toast marked read",
    )
    assert [n["read"] for n in _history(running_ui) if n["priority"] == 20] == [False]

    page.get_by_test_id("notifications-open").click()
    dialog = page.get_by_test_id("notifications-dialog")
    expect(dialog.get_by_test_id("notification-item")).to_have_count(2)
    dialog.get_by_test_id("notifications-mark-read").click()
    wait_until(lambda: all(n["read"] for n in _history(running_ui)), what="all marked read")
    expect(page.get_by_test_id("toast")).to_have_count(0)
    expect(page.get_by_test_id("notifications-unread")).to_be_hidden()
    dialog.get_by_test_id("notifications-clear").click()
    expect(dialog.get_by_test_id("notifications-empty")).to_be_visible(timeout=TIMEOUT_MS)
    wait_until(lambda: _history(running_ui) == [], what="the history cleared")


def test_delete_chat_reset_and_delete_task_ask_first(page: Page, running_ui, model_server):
    model_server.tool("response", {"text": "hello there"})
    page.goto(running_ui.url)
    page.get_by_test_id("send-input").fill("hi")
    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("messages")).to_contain_text("hello there", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("chat-status")).to_have_text("idle", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("chat-progress")).to_have_text("")  # no "A0: Responding"
    confirm = page.get_by_test_id("confirm-dialog")

    page.get_by_test_id("reset-chat").click()
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("Reset")
    page.get_by_test_id("confirm-cancel").click()
    expect(confirm).to_be_hidden()
    _polls(page, 2)
    expect(page.get_by_test_id("messages")).to_contain_text("hello there")

    page.get_by_test_id("remove-chat").click()
    expect(confirm).to_contain_text("Delete")
    page.keyboard.press("Escape")  # Escape is a cancel too
    expect(confirm).to_be_hidden()
    _polls(page, 2)
    expect(page.get_by_test_id("chat-item")).to_have_count(1)

    page.get_by_test_id("reset-chat").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("messages")).not_to_contain_text("hello there", timeout=TIMEOUT_MS)
    page.get_by_test_id("remove-chat").click()
    page.get_by_test_id("confirm-ok").click()
    expect(page.get_by_test_id("chat-item")).to_have_count(0, timeout=TIMEOUT_MS)

    with running_ui.ui_client() as client:
        made = client.post(
            "/api/scheduler_task_create",
            json={"name": "Daily", "type": "adhoc", "prompt": "Say hi.", "timezone": "UTC"},
        )
        assert made.status_code == 200, made.text
    page.get_by_test_id("tasks-open").click()
    tasks = page.get_by_test_id("tasks-dialog")
    row = tasks.get_by_test_id("task-row")
    expect(row).to_have_count(1, timeout=TIMEOUT_MS)
    row.get_by_test_id("task-delete").click()
    expect(confirm).to_contain_text("Daily")
    page.get_by_test_id("confirm-cancel").click()
    expect(row).to_have_count(1)
    row.get_by_test_id("task-delete").click()
    page.get_by_test_id("confirm-ok").click()
    expect(tasks.get_by_test_id("tasks-list")).to_contain_text("No tasks yet.")
    # the notice of the deletion does not outlive Refresh
    expect(tasks.get_by_test_id("tasks-message")).to_contain_text("deleted")
    tasks.get_by_test_id("tasks-refresh").click()
    expect(tasks.get_by_test_id("tasks-message")).to_be_hidden()


def test_settings_errors_in_plain_words_and_escape_asks_before_dropping_edits(
    page: Page, running_ui
):
    page.goto(running_ui.url)
    page.get_by_test_id("settings-open").click()
    dialog = page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    expect(dialog.get_by_test_id("settings-save")).to_be_in_viewport()  # Save always visible
    original = dialog.get_by_test_id("code_exec_max_timeout").input_value()

    dialog.get_by_test_id("code_exec_max_timeout").fill("soon")
    expect(dialog.get_by_test_id("settings-dirty")).to_have_text("1 unsaved change")
    dialog.get_by_test_id("settings-save").click()
    error = dialog.get_by_test_id("error-code_exec_max_timeout")
    expect(error).to_contain_text("must be a whole number, for example 30")
    expect(error).not_to_contain_text("invalid literal")
    expect(dialog.get_by_test_id("settings-error")).to_be_hidden()  # next to the field only

    # Escape with an edit asks; Cancel keeps the dialog and the edit
    dialog.get_by_test_id("code_exec_max_timeout").press("Escape")
    confirm = page.get_by_test_id("confirm-dialog")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("without saving")
    page.get_by_test_id("confirm-cancel").click()
    expect(dialog).to_be_visible()
    expect(dialog.get_by_test_id("code_exec_max_timeout")).to_have_value("soon")

    # the Cancel button asks too; discarding closes and drops the edit
    dialog.get_by_test_id("settings-cancel").click()
    page.get_by_test_id("confirm-ok").click()
    expect(dialog).to_be_hidden()
    page.get_by_test_id("settings-open").click()
    expect(dialog.get_by_test_id("code_exec_max_timeout")).to_have_value(original)
    # without edits Escape just closes
    dialog.get_by_test_id("code_exec_max_timeout").press("Escape")
    expect(dialog).to_be_hidden()
    expect(confirm).to_be_hidden()
