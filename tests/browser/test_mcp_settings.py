"""MCP servers in the Settings dialog in a real browser: the status section, and the
mcp_servers setting edited and saved like the others (a bad value refused at its field)."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.support.mcp_servers import stdio_config
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000


def test_settings_show_mcp_servers_and_save_a_new_config(page: Page, tmp_path, model_server):
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
        field = dialog.get_by_test_id("mcp_servers")
        expect(field).to_have_value(json.dumps(servers))
        expect(dialog.get_by_test_id("help-mcp_servers")).to_contain_text("A0_SET_mcp_servers")

        field.fill('{"mcpServers": {"x": {}}}')
        dialog.get_by_test_id("settings-save").click()
        expect(dialog.get_by_test_id("error-mcp_servers")).to_contain_text("needs a 'command'")
        assert not (server.usr_dir / "settings.json").exists()

        broken = {"mcpServers": {"notes": stdio_config(log), "gone": {"command": "/no/such"}}}
        field.fill(json.dumps(broken))
        dialog.get_by_test_id("settings-save").click()
        expect(dialog).to_be_hidden(timeout=TIMEOUT_MS)
        page.get_by_test_id("settings-open").click()
        expect(dialog.get_by_test_id("mcp-state-gone")).to_have_text("failed", timeout=TIMEOUT_MS)
        expect(dialog.get_by_test_id("mcp-server-gone")).to_contain_text("no/such")
        expect(dialog.get_by_test_id("mcp-state-notes")).to_have_text("connected")
    finally:
        server.stop()
