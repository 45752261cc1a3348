"""The web UI in a real browser: send a message, watch the tool call and the answer stream in."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def test_message_shows_tool_call_and_answer(page: Page, running_ui, model_server):
    model_server.tool(
        "code_execution_tool",
        {"runtime": "terminal", "code": "echo browser-$((40 + 2))"},
        headline="Running echo",
    )
    model_server.tool("response", {"text": "The command printed browser-42."})

    page.goto(running_ui.url)
    page.get_by_test_id("send-input").fill("Run the echo command please")
    page.get_by_test_id("send-button").click()

    expect(page.get_by_test_id("log-response")).to_contain_text(
        "The command printed browser-42.", timeout=TIMEOUT_MS
    )
    expect(page.get_by_test_id("log-user")).to_contain_text("Run the echo command please")
    tool_items = page.locator("[data-testid=log-tool], [data-testid=log-code_exe]")
    expect(tool_items.first).to_contain_text("code_execution_tool")
    expect(page.get_by_test_id("messages")).to_contain_text("browser-42")
    expect(page.get_by_test_id("chat-item")).to_have_count(1)
    expect(page.get_by_test_id("chat-status")).to_have_text("idle", timeout=TIMEOUT_MS)


def test_new_chat_and_remove(page: Page, running_ui):
    page.goto(running_ui.url)
    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("chat-item")).to_have_count(1, timeout=TIMEOUT_MS)
    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("chat-item")).to_have_count(2, timeout=TIMEOUT_MS)
    page.get_by_test_id("remove-chat").click()
    page.get_by_test_id(
        "confirm-ok"
    ).click()  # Delete asks first (tests/browser/test_first_hour.py)
    expect(page.get_by_test_id("chat-item")).to_have_count(1, timeout=TIMEOUT_MS)


def test_settings_dialog_never_shows_a_key_back(page: Page, running_ui):
    secret = "sk-browser-test-0123456789"
    page.goto(running_ui.url)
    page.get_by_test_id("settings-open").click()
    dialog = page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    expect(dialog.get_by_test_id("chat_model_name")).to_have_value("scripted")
    key_inputs = dialog.locator("input[data-testid^=api-key-]")
    expect(key_inputs.first).to_be_visible()
    provider = key_inputs.first.get_attribute("data-testid").removeprefix("api-key-")
    key_inputs.first.fill(secret)
    dialog.get_by_test_id("settings-save").click()
    expect(dialog).to_be_hidden(timeout=TIMEOUT_MS)

    page.get_by_test_id("settings-open").click()
    expect(dialog.get_by_test_id(f"api-key-state-{provider}")).to_have_text(
        "(set)", timeout=TIMEOUT_MS
    )
    expect(dialog.get_by_test_id(f"api-key-{provider}")).to_have_value("")
    assert secret not in page.content()
    with running_ui.ui_client() as client:
        view = client.post("/api/settings_get", json={})
    assert view.status_code == 200
    assert secret not in view.text
    assert view.json()["api_keys"][provider] is True
    assert httpx.get(f"{running_ui.url}/api/health").status_code == 200


def test_pause_resume_and_stop_a_running_turn(page: Page, running_ui, model_server):
    model_server.tool("code_execution_tool", {"runtime": "terminal", "code": "sleep 120"})
    page.goto(running_ui.url)
    page.get_by_test_id("send-input").fill("sleep a long time")
    page.get_by_test_id("send-input").press("Enter")
    status = page.get_by_test_id("chat-status")
    expect(status).to_have_text("running", timeout=TIMEOUT_MS)
    page.get_by_test_id("pause-chat").click()
    expect(status).to_have_text("paused", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("pause-chat")).to_have_text("Resume")
    page.get_by_test_id("pause-chat").click()
    expect(status).to_have_text("running", timeout=TIMEOUT_MS)
    page.get_by_test_id("stop-chat").click()
    expect(status).to_have_text("idle", timeout=TIMEOUT_MS)
    expect(page.get_by_test_id("log-info").last).to_contain_text("Stopped by the user.")
    expect(page.get_by_test_id("stop-chat")).to_be_disabled()


def test_attachment_is_uploaded_with_the_message(page: Page, running_ui, model_server, tmp_path):
    model_server.tool("response", {"text": "Got your file."})
    note = tmp_path / "notes.txt"
    note.write_text("attached content")
    page.goto(running_ui.url)
    expect(page.get_by_test_id("logout-link")).to_be_hidden()
    page.get_by_test_id("attach-input").set_input_files(str(note))
    expect(page.get_by_test_id("attach-count")).to_have_text("1 file")
    page.get_by_test_id("send-input").fill("see the attachment")
    page.get_by_test_id("send-button").click()
    expect(page.get_by_test_id("log-response")).to_contain_text(
        "Got your file.", timeout=TIMEOUT_MS
    )
    expect(page.get_by_test_id("log-user")).to_contain_text("notes.txt")
    uploads = list((running_ui.usr_dir / "uploads").iterdir())
    assert [p.read_text() for p in uploads] == ["attached content"]
    assert "notes.txt" in model_server.requests[0]["messages"][-1]["content"]


def test_login_page_then_chat(page: Page, ui_server, model_server):
    from tests.support.ui_server import ui_env_for

    ui_server.env.update(ui_env_for(model_server))
    ui_server.env.update({"AUTH_LOGIN": "ann", "AUTH_PASSWORD": "pw-123456"})
    ui_server.start(timeout=60)
    page.goto(ui_server.url)
    expect(page).to_have_url(f"{ui_server.url}/login")
    page.fill("#login-user", "ann")
    page.fill("#login-password", "wrong")
    page.click("#login-submit")
    expect(page.locator("#login-error")).to_be_visible()
    page.fill("#login-user", "ann")
    page.fill("#login-password", "pw-123456")
    page.click("#login-submit")
    expect(page.get_by_test_id("new-chat")).to_be_visible()
    expect(page.get_by_test_id("logout-link")).to_be_visible(timeout=TIMEOUT_MS)
    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("chat-item")).to_have_count(1, timeout=TIMEOUT_MS)
    page.get_by_test_id("logout-link").click()
    expect(page).to_have_url(f"{ui_server.url}/login")
    assert ui_server.stop() == 0


def test_an_idle_chat_is_listed_after_a_restart_and_opens_when_clicked(
    page: Page, running_ui, model_server
):
    """Issue #24: after a restart an idle chat is listed from its journaled summary (not
    rebuilt), with its name; clicking it rebuilds it and shows its log."""
    model_server.tool("response", {"text": "Answered before the restart."})
    answer = running_ui.api_message("A question before the restart")
    assert answer.status_code == 200, answer.text
    context_id = answer.json()["context_id"]
    with running_ui.ui_client() as client:
        rows = client.post("/api/poll", json={"context": "", "log_from": 0}).json()["contexts"]
    name = next(row["name"] for row in rows if row["id"] == context_id)
    assert name
    assert running_ui.stop() == 0
    running_ui.start(timeout=60)

    with running_ui.ui_client() as client:
        rows = client.post("/api/poll", json={"context": "", "log_from": 0}).json()["contexts"]
    assert [(r["id"], r["name"], r["log_guid"]) for r in rows] == [(context_id, name, "")]
    page.goto(running_ui.url)
    item = page.get_by_test_id("chat-item")
    expect(item).to_have_count(1, timeout=TIMEOUT_MS)
    expect(item).to_contain_text(name)
    item.click()
    expect(page.get_by_test_id("log-response")).to_contain_text(
        "Answered before the restart.", timeout=TIMEOUT_MS
    )
    expect(page.get_by_test_id("log-user")).to_contain_text("A question before the restart")
