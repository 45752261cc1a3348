"""MCP tools through real turns: run_ui.py, the scripted model, real MCP servers written with
the SDK (tests/support/mcp_test_server.py) whose tools append to a side-effect log, and real
SIGKILLs. An MCP call is journaled with policy hold: a committed result is reused, a call cut
by a crash is held (never sent again), and a dying or garbage server is a tool error."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from tests.integration._durable_system import KEY, crashable
from tests.integration._helpers import chat_log, log_text, request_text, wait_until
from tests.support.mcp_servers import effects, garbage_config, http_mcp_server, stdio_config
from tests.support.ui_server import SLOW_START, UiServer, ui_env_for

pytestmark = pytest.mark.integration

__all__ = ["crashable"]  # the fixture

ENV_KEY = "mcp-env-key-5f1e9a77c3"
BEARER = "mcp-bearer-0b7d41e2aa"


def mcp_env(servers: dict) -> dict[str, str]:
    return {
        "A0_SET_mcp_servers": json.dumps({"mcpServers": servers}),
        "A0_SET_mcp_client_init_timeout": "30",
        "A0_SET_mcp_client_tool_timeout": "30",
    }


def status(server: UiServer) -> dict:
    response = httpx.post(f"{server.url}/api/mcp_servers_status", headers=KEY, timeout=30)
    assert response.status_code == 200, response.text
    return {row["name"]: row for row in response.json()["servers"]}


def test_mcp_tools_in_a_real_turn_with_credentials_masked(tmp_path, model_server):
    log = tmp_path / "effects.log"
    usr = tmp_path / "usr"
    with http_mcp_server(log, token=BEARER) as url:
        server = UiServer(usr, env=ui_env_for(model_server))
        try:
            server.start(timeout=SLOW_START)
            config = {
                "mcpServers": {
                    "notes": stdio_config(log, MCP_TEST_API_KEY=ENV_KEY),
                    "Remote Notes": {"url": url, "headers": {"Authorization": f"Bearer {BEARER}"}},
                }
            }
            with server.ui_client() as client:
                applied = client.post("/api/mcp_servers_apply", json={"mcp_servers": config})
                assert applied.status_code == 200, applied.text
                bad = client.post("/api/mcp_servers_apply", json={"mcp_servers": "{oops"})
                assert bad.status_code == 400
                assert bad.json()["error"]["code"] == "invalid_setting"
            rows = wait_until(
                lambda: (
                    (s := status(server))
                    and all(r["state"] == "connected" for r in s.values())
                    and s
                ),
                timeout=60,
                what="both MCP servers connected",
            )
            assert set(rows) == {"notes", "remote_notes"}
            assert "add_note" in rows["remote_notes"]["tools"]

            model_server.tool("notes.add_note", {"text": "one"})
            model_server.tool("remote_notes.add_note", {"text": "two"})
            model_server.tool("notes.whoami", {})
            model_server.tool("response", {"text": "noted twice"})
            response = server.api_message("take two notes", input_id="mcp-turn")
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["response"] == "noted twice"
            assert effects(log) == ["note:one", "note:two"]

            system = model_server.requests[0]["messages"][0]["content"]
            assert "### notes.add_note" in system and "### remote_notes.add_note" in system
            assert '"required": ["text"]' in system
            assert "noted: one" in request_text(model_server.requests[1])
            assert "noted: two" in request_text(model_server.requests[2])
            whoami = request_text(model_server.requests[3])
            assert "§§secret(MCP_NOTES_MCP_TEST_API_KEY)" in whoami and ENV_KEY not in whoami

            run = httpx.post(
                f"{server.url}/api/durable_run", json={"run_id": body["run_id"]}, headers=KEY
            ).json()["run"]
            mcp_calls = [c for c in run["calls"] if c["name"].startswith(("notes.", "remote_"))]
            assert [(c["name"], c["replay_policy"], c["committed"]) for c in mcp_calls] == [
                ("notes.add_note", "hold", True),
                ("remote_notes.add_note", "hold", True),
                ("notes.whoami", "hold", True),
            ]
            detail = httpx.post(
                f"{server.url}/api/mcp_server_get_detail",
                json={"server_name": "notes"},
                headers=KEY,
            ).json()["server"]
            assert {t["name"] for t in detail["tools"]} >= {"add_note", "whoami"}
            chat = log_text(chat_log(server, body["context_id"]))
        finally:
            code = server.stop()
        assert code == 0
    journal = (usr / "durability" / "journal.sqlite").read_bytes()
    for secret in (ENV_KEY, BEARER):
        assert secret.encode() not in journal, "a credential reached the journal"
        assert secret not in server.output(), "a credential reached the server log"
        assert secret not in chat, "a credential reached the chat log"


def _send_in_background(server: UiServer, message: str, input_id: str) -> threading.Thread:
    def send() -> None:
        try:
            server.api_message(message, input_id=input_id)
        except httpx.HTTPError:
            pass  # the server is killed mid-request

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread


def test_a_crash_in_the_middle_of_an_mcp_call_is_held_with_one_effect(
    crashable, model_server, tmp_path
):
    log = tmp_path / "effects.log"
    release = tmp_path / "release"
    with http_mcp_server(log) as url:
        env = mcp_env({"remote": {"url": url, "type": "streamable-http"}})
        model_server.tool("remote.slow_note", {"text": "pay", "release_file": str(release)})
        model_server.tool("response", {"text": "paid"})
        server = crashable.start(**env)
        sender = _send_in_background(server, "pay once", "pay-mcp")
        wait_until(lambda: effects(log) == ["slow:pay"], timeout=60, what="the MCP call to start")
        crashable.kill()  # SIGKILL while the server is still inside the call
        sender.join(30)
        release.touch()  # the server finishes its call; nobody reads the answer

        crashable.start(**env)
        run = crashable.only_run()
        held = crashable.wait_status(run["run_id"], "needs_attention")
        assert held["reason"] == "uncertain_call"
        open_calls = [c for c in held["calls"] if not c["committed"]]
        assert [(c["name"], c["replay_policy"]) for c in open_calls] == [
            ("remote.slow_note", "hold")
        ]
        assert effects(log) == ["slow:pay"]  # held, not sent again by recovery
        decided = crashable.decide(held, "confirmed_completed", note="the note is there")
        assert decided.status_code == 200, decided.text
        crashable.wait_status(run["run_id"], "completed")
        assert effects(log) == ["slow:pay"]
        assert model_server.calls == 2
        crashable.stop()


def test_a_committed_mcp_result_is_reused_after_a_crash(crashable, model_server, tmp_path):
    log = tmp_path / "effects.log"
    env = mcp_env({"notes": stdio_config(log)})
    model_server.tool("notes.add_note", {"text": "once"})
    model_server.tool("response", {"text": "stored once"})
    crash = {"A0_CRASH_AT": "after_result", "A0_CRASH_MATCH": "notes.add_note"}
    crashable.crash_during("store a note", "note-once", **crash, **env)
    assert effects(log) == ["note:once"]

    crashable.start(**env)
    run = crashable.only_run()
    done = crashable.wait_status(run["run_id"], "completed")
    assert effects(log) == ["note:once"]  # the server was not called again
    assert [c["name"] for c in done["calls"] if c["name"] == "notes.add_note"] == ["notes.add_note"]
    assert model_server.calls == 2  # the reply that chose the tool was reused too
    again = crashable.server.api_message("store a note", input_id="note-once")
    assert again.json()["response"] == "stored once"
    crashable.stop()


def test_a_dying_or_garbage_server_is_a_tool_error_not_a_dead_run(model_server, tmp_path: Path):
    log = tmp_path / "effects.log"
    server = UiServer(
        tmp_path / "usr",
        env={
            **ui_env_for(model_server),
            **mcp_env({"notes": stdio_config(log), "junk": garbage_config(log)}),
        },
    )
    model_server.tool("notes.die", {})
    model_server.tool("junk.echo", {})
    model_server.tool("notes.add_note", {"text": "still here"})
    model_server.tool("response", {"text": "survived"})
    try:
        server.start(timeout=SLOW_START)
        response = server.api_message("try the servers")
        assert response.status_code == 200, response.text
        assert response.json()["response"] == "survived"
    finally:
        code = server.stop()
    assert code == 0, server.output()[-3000:]
    died = request_text(model_server.requests[1])
    assert "MCP tool 'notes.die' failed" in died and "may or may not have taken effect" in died
    assert "not a valid MCP result" in request_text(model_server.requests[2])
    assert "noted: still here" in request_text(model_server.requests[3])  # reconnected
    assert effects(log) == ["die", "garbage-call", "note:still here"]
