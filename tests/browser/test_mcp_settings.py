"""The MCP section of the Settings dialog in a real browser: status, apply, errors."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.support.mcp_servers import stdio_config
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def test_settings_show_mcp_servers_and_apply_a_new_config(page: Page, tmp_path, model_server):
    log = tmp_path / "effects.log"
    servers = {"mcpServers": {"notes": stdio_config(log)}}
    env = {**ui_env_for(model_server), "A0_SET_mcp_servers": json.dumps(servers)}
    server = UiServer(tmp_path / "usr", env=env)
    try:
        server.start(timeout=SLOW_START)
        page.goto(server.url)
        page.get_by_test_id("settings-open").click()
        dialog = page.get_by_test_id("settings-dialog")
        expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
        expect(dialog.get_by_test_id("mcp-state-notes")).to_have_text(
            "connected", timeout=TIMEOUT_MS
        )
        expect(dialog.get_by_test_id("mcp-server-notes")).to_contain_text("add_note")
        text = dialog.get_by_test_id("mcp-servers-text")
        expect(text).to_have_value(json.dumps(servers))

        text.fill("{not json")
        dialog.get_by_test_id("mcp-servers-apply").click()
        expect(dialog.get_by_test_id("mcp-servers-error")).to_contain_text("invalid_setting")

        broken = {"mcpServers": {"notes": stdio_config(log), "gone": {"command": "/no/such"}}}
        text.fill(json.dumps(broken))
        dialog.get_by_test_id("mcp-servers-apply").click()
        expect(dialog.get_by_test_id("mcp-state-gone")).to_have_text("failed", timeout=TIMEOUT_MS)
        expect(dialog.get_by_test_id("mcp-server-gone")).to_contain_text("no/such")
        expect(dialog.get_by_test_id("mcp-state-notes")).to_have_text("connected")
    finally:
        server.stop()
