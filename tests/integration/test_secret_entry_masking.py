"""Secrets are masked where they enter (issue #17, point 8), over HTTP against real run_ui.py
processes: a key planted in a message, echoed by a shell command and repeated by the model
never reaches the model, a read endpoint, the server log or the receipts folder in clear,
and a retried ``input_id`` after a restart returns byte for byte the first answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durability.paths import receipts_dir
from tests.integration._durable_system import Crashable, crashable
from tests.integration._helpers import request_text

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["crashable"]  # the fixture

SECRET = "pl4nted-Secret-7c1e9a02"
PLACEHOLDER = "§§secret(PLANTED_KEY)"


def _script(crashable: Crashable) -> None:
    (crashable.usr / "secrets.env").write_text(f"PLANTED_KEY={SECRET}\n", encoding="utf-8")
    model = crashable.model
    # the shell prints the real value (the placeholder is the secret for the tool) ...
    model.tool("code_execution_tool", {"runtime": "terminal", "code": f"echo {PLACEHOLDER}"})
    # ... and the model repeats it in clear in its reply and in its answer
    model.tool("response", {"text": f"The key is {SECRET} (from {PLACEHOLDER})."})


def _reads(crashable: Crashable, context_id: str) -> dict[str, str]:
    """The text of every endpoint that shows the chat."""
    assert crashable.server is not None
    out = {"api_log_get": crashable.post("api_log_get", {"context_id": context_id}).text}
    with crashable.server.ui_client() as client:
        out["poll"] = client.post("/api/poll", json={"context": context_id, "log_from": 0}).text
        out["history_get"] = client.post("/api/history_get", json={"context": context_id}).text
        out["chat_export"] = client.post("/api/chat_export", json={"ctxid": context_id}).text
    return out


def _answer(crashable: Crashable, message: str) -> dict[str, Any]:
    response = crashable.post("api_message", {"message": message, "input_id": "planted-1"})
    assert response.status_code == 200, response.text
    return response.json()


def test_a_planted_secret_is_masked_at_entry_and_the_recorded_answer_is_the_first(crashable):
    _script(crashable)
    crashable.start()
    message = f"Remember my key {SECRET} and print it."
    first = _answer(crashable, message)
    assert first["status"] == "completed", first
    assert SECRET not in json.dumps(first, ensure_ascii=False), first
    assert PLACEHOLDER in first["response"], first
    reads = _reads(crashable, first["context_id"])
    for name, text in reads.items():
        assert SECRET not in text, f"{name} shows the planted secret in clear"
    assert PLACEHOLDER in reads["history_get"]  # the agent's memory holds the placeholder
    requests = crashable.model.requests
    assert len(requests) == 2
    for request in requests:
        assert SECRET not in json.dumps(request, ensure_ascii=False), "the model saw the secret"
    assert PLACEHOLDER in request_text(requests[0])
    # the shell got the real value: its output reached the second request, masked
    assert "\n" + PLACEHOLDER in request_text(requests[1])
    folder = receipts_dir(crashable.usr)
    for path in (p for p in folder.rglob("*") if p.is_file()):
        assert SECRET.encode() not in path.read_bytes(), f"{path.name} holds the secret"
    crashable.stop()
    crashable.start()
    again = _answer(crashable, message)
    assert again == first, "the recorded answer differs from the first"
    assert crashable.model.calls == 2  # nothing ran again
    after = _reads(crashable, first["context_id"])
    for name, text in after.items():
        assert SECRET not in text, f"{name} shows the planted secret in clear after a restart"
    crashable.stop()
    for generation in (1, 2):
        log = (crashable.usr.parent / f"run_ui-{generation}.log").read_text(errors="replace")
        assert SECRET not in log, "the server log holds the secret"
