"""Every endpoint and every error code the server can return is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from durability import errors as durability_errors
from python.helpers import errors as glue_errors
from python.server.api import discover_handlers
from python.server.errors import FOREIGN, STATUS

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


def raised_codes() -> set[str]:
    """Every code the server can answer with: the edge's literal ``ApiError("...")`` /
    ``BodyRefused("...")`` codes, the glue's and the journal's error classes, the foreign
    exceptions' codes."""
    sources = [ROOT / "run_ui.py"]
    for folder in ("helpers", "api", "durable", "server", "tools"):
        sources += list((ROOT / "python" / folder).glob("*.py"))
    codes = {"internal_error"} | {code for _, code in FOREIGN}
    for path in sources:
        text = path.read_text()
        codes |= set(re.findall(r'(?:ApiError|BodyRefused|error_response)\(\s*"([a-z_]+)"', text))
    glue = [c for c in vars(glue_errors).values() if isinstance(c, type)]
    codes |= {c.code for c in glue if issubclass(c, glue_errors.DomainError)}
    codes |= {c.code for c in durability_errors.ALL_ERRORS}
    return codes


def test_every_code_the_server_raises_has_a_status_in_the_one_table():
    missing = raised_codes() - set(STATUS) - {"domain_error"}
    assert not missing, f"codes without a status in python/server/errors.py: {sorted(missing)}"


def test_every_error_code_is_documented_with_its_status():
    docs = (ROOT / "docs" / "errors.md").read_text() + (ROOT / "docs" / "durability.md").read_text()
    wrong = [
        f"{code} {status}"
        for code, status in STATUS.items()
        if not re.search(rf"^\| `{code}` \| {status} \|", docs, re.MULTILINE)
    ]
    assert not wrong, f"undocumented codes (or documented with another status): {wrong}"
