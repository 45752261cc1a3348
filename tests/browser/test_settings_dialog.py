"""The Settings dialog in a real browser: every documented setting, errors next to fields."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser

TIMEOUT_MS = 60_000
DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def documented_settings() -> list[str]:
    names = re.findall(r"^- `(\w+)` \(default", DOC.read_text(), re.MULTILINE)
    assert len(names) >= 20, names
    return names


def test_every_documented_setting_can_be_seen_and_changed(page: Page, running_ui):
    page.goto(running_ui.url)
    page.get_by_test_id("settings-open").click()
    dialog = page.get_by_test_id("settings-dialog")
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    for name in documented_settings():
        expect(dialog.get_by_test_id(name)).to_have_count(1)
    # a default from A0_SET_ is shown and can be changed (a saved value wins, as upstream)
    expect(dialog.get_by_test_id("chat_model_name")).to_have_value("scripted")
    expect(dialog.get_by_test_id("chat_model_name")).to_be_enabled()
    expect(dialog.get_by_test_id("help-chat_model_name")).to_contain_text("A0_SET_chat_model_name")

    dialog.get_by_test_id("chat_model_ctx_history").fill("2")
    dialog.get_by_test_id("code_exec_max_timeout").fill("soon")
    dialog.get_by_test_id("util_model_kwargs").fill("[1]")
    dialog.get_by_test_id("retention_days").fill("7")
    dialog.get_by_test_id("settings-save").click()
    expect(dialog.get_by_test_id("error-chat_model_ctx_history")).to_contain_text("at most 1")
    expect(dialog.get_by_test_id("error-code_exec_max_timeout")).to_contain_text(
        "code_exec_max_timeout"
    )
    expect(dialog.get_by_test_id("error-util_model_kwargs")).to_be_visible()
    expect(dialog.get_by_test_id("error-retention_days")).to_be_hidden()
    expect(dialog).to_be_visible()
    assert not (running_ui.usr_dir / "settings.json").exists()

    dialog.get_by_test_id("chat_model_ctx_history").fill("0.5")
    dialog.get_by_test_id("code_exec_max_timeout").fill("90")
    dialog.get_by_test_id("util_model_kwargs").fill('{"temperature": 0}')
    dialog.get_by_test_id("agent_profile").fill("developer")
    dialog.get_by_test_id("settings-save").click()
    expect(dialog).to_be_hidden(timeout=TIMEOUT_MS)
    stored = json.loads((running_ui.usr_dir / "settings.json").read_text())
    assert stored == {
        "agent_profile": "developer",
        "chat_model_ctx_history": 0.5,
        "code_exec_max_timeout": 90,
        "retention_days": 7,
        "util_model_kwargs": {"temperature": 0},
    }

    page.get_by_test_id("settings-open").click()
    # the closed dialog still holds the fields as typed: the dialog shows once it is redrawn
    expect(dialog).to_be_visible(timeout=TIMEOUT_MS)
    expect(dialog.get_by_test_id("retention_days")).to_have_value("7", timeout=TIMEOUT_MS)
    expect(dialog.get_by_test_id("chat_model_ctx_history")).to_have_value("0.5")
    expect(dialog.get_by_test_id("error-retention_days")).to_be_hidden()
