"""Every endpoint and every error code the server can return is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from python.helpers.api import ERROR_TABLE, discover_handlers

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
REQUIRED = {
    "message",
    "message_async",
    "poll",
    "pause",
    "nudge",
    "chat_create",
    "chat_reset",
    "chat_remove",
    "chat_load",
    "chat_export",
    "chat_stop",
    "history_get",
    "settings_get",
    "settings_set",
    "csrf_token",
    "health",
    "api_message",
    "api_reset_chat",
    "api_terminate_chat",
    "api_log_get",
}


def test_every_required_endpoint_exists_as_one_module():
    handlers = discover_handlers()
    assert set(handlers) >= REQUIRED
    assert handlers["api_message"].requires_api_key
    assert not handlers["health"].requires_auth
    assert handlers["message"].csrf_required()


def test_every_endpoint_is_documented():
    doc = (ROOT / "docs" / "api.md").read_text()
    headings = set(re.findall(r"^### (\w+)$", doc, re.MULTILINE))
    missing = set(discover_handlers()) - headings
    assert not missing, f"undocumented endpoints: {sorted(missing)}"


def test_every_error_code_is_documented():
    doc = (ROOT / "docs" / "errors.md").read_text()
    sources = [ROOT / "run_ui.py", *(ROOT / "python" / "helpers").glob("*.py")]
    sources += list((ROOT / "python" / "api").glob("*.py"))
    sources += list((ROOT / "python" / "durable").glob("*.py"))
    codes = {"internal_error"} | {code for _, code, _ in ERROR_TABLE}
    for path in sources:
        codes |= set(re.findall(r'ApiError\(\s*"([a-z_]+)"', path.read_text()))
    missing = {code for code in codes if f"`{code}`" not in doc}
    assert not missing, f"undocumented error codes: {sorted(missing)}"
