"""Retention while the server runs, then a restart: a purged chat is gone both times.

`python -m durability retention` (a real subprocess) removes old finished runs from the
journal a running server uses. A chat whose every run went is gone: `404
context_not_found` right away and after a restart alike; an input id whose run went is a
new input (a new chat, a new run) before and after the restart alike (issue #7, point 7).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests.support.ui_server import REPO, SLOW_START, VENV_PYTHON, ui_env_for

pytestmark = pytest.mark.integration

TOKEN = "test-token"


def retention(usr, *args: str) -> dict:
    python = VENV_PYTHON if VENV_PYTHON.exists() else sys.executable
    db = usr / "durability" / "journal.sqlite"
    proc = subprocess.run(
        [str(python), "-m", "durability", "retention", "--db", str(db), "--json", *args],
        cwd=REPO,
        env={**os.environ, "A0_USR_DIR": str(usr)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def chat_ids(server) -> list[str]:
    with server.ui_client() as client:
        response = client.post("/api/poll", json={})
        assert response.status_code == 200, response.text
        return [c["id"] for c in response.json()["contexts"]]


def post(server, endpoint: str, body: dict) -> httpx.Response:
    return httpx.post(
        f"{server.url}/api/{endpoint}", json=body, headers={"X-API-KEY": TOKEN}, timeout=60
    )


def assert_gone(server, chat: str) -> None:
    """Every way of naming the chat answers 404 context_not_found."""
    answers = [
        server.api_message("still there?", context_id=chat),
        post(server, "api_log_get", {"context_id": chat}),
        post(server, "api_reset_chat", {"context_id": chat}),
        post(server, "api_terminate_chat", {"context_id": chat}),
    ]
    with server.ui_client() as client:
        answers.append(client.post("/api/history_get", json={"context": chat}))
        answers.append(client.post("/api/durable_plan_get", json={"context_id": chat}))
        answers.append(client.post("/api/message_async", json={"text": "hi", "context": chat}))
    for answer in answers:
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["code"] == "context_not_found"
    assert chat not in chat_ids(server)


def test_a_purged_chat_is_gone_and_a_purged_input_is_new_before_and_after_a_restart(
    ui_server, model_server
):
    ui_server.env.update(ui_env_for(model_server))
    ui_server.start(timeout=SLOW_START)
    model_server.respond_with(
        lambda body: {
            "tool_name": "response",
            "tool_args": {"text": f"answer {model_server.calls}"},
        }
    )
    old = [ui_server.api_message(f"old job {n}", input_id=f"old-{n}").json() for n in (1, 2)]
    kept = ui_server.api_message("recent job", input_id="recent").json()
    assert all(b["status"] == "completed" for b in [*old, kept])

    report = retention(ui_server.usr_dir, "--runs", "1", "--days", "0")

    assert sorted(report["run_ids"]) == sorted(b["run_id"] for b in old)
    # before a restart: the purged chats are gone, the kept one stays
    for body in old:
        assert_gone(ui_server, body["context_id"])
    assert chat_ids(ui_server) == [kept["context_id"]]
    again = ui_server.api_message("recent job", input_id="recent").json()
    assert again == kept  # a kept input is still the same input
    calls = model_server.calls
    renewed = ui_server.api_message("old job 1", input_id="old-1").json()
    assert renewed["status"] == "completed" and model_server.calls == calls + 1
    assert renewed["run_id"] != old[0]["run_id"]
    assert renewed["context_id"] not in (old[0]["context_id"], kept["context_id"])

    assert ui_server.stop() == 0
    ui_server.start(timeout=SLOW_START)

    # after the restart: the same answers
    for body in old:
        assert_gone(ui_server, body["context_id"])
    assert sorted(chat_ids(ui_server)) == sorted([kept["context_id"], renewed["context_id"]])
    assert ui_server.api_message("old job 1", input_id="old-1").json() == renewed
    calls = model_server.calls
    second = ui_server.api_message("old job 2", input_id="old-2").json()
    assert second["status"] == "completed" and model_server.calls == calls + 1
    assert second["run_id"] != old[1]["run_id"]
    assert second["context_id"] != old[1]["context_id"]
    assert ui_server.stop() == 0
