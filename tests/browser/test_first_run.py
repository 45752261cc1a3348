"""A first run that guides (#23 point 1), in a real browser: a fresh usr with no API key says
so at the top; the first message fails with guidance and a way to Settings, no hold; after
the key is saved the next message is answered."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.support.ui_server import SLOW_START

pytestmark = pytest.mark.browser

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
