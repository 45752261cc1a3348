"""The MCP client against real MCP servers written with the same SDK (stdio, streamable
HTTP, SSE) and a garbage one: connecting, listing, calling, and clear errors."""

from __future__ import annotations

import pytest

from python.helpers import mcp_client, secrets
from python.helpers.mcp_client import McpCallError, McpManager
from tests.support.mcp_servers import effects, garbage_config, http_mcp_server, stdio_config

pytestmark = pytest.mark.unit

TOKEN = "bearer-t0ken-for-tests"


def settings(servers: dict, **extra) -> dict:
    import json

    return {
        "mcp_servers": json.dumps({"mcpServers": servers}),
        "mcp_client_init_timeout": 20,
        "mcp_client_tool_timeout": 20,
        **extra,
    }


@pytest.fixture
async def manager():
    made = McpManager()
    yield made
    await made.close()


async def test_stdio_server_lists_and_calls_tools(manager, tmp_path):
    log = tmp_path / "effects.log"
    await manager.apply(settings({"My Notes!": stdio_config(log)}))
    assert list(manager.servers) == ["my_notes_"]  # upstream's name normalisation
    await manager.wait_ready()
    status = manager.status()["servers"][0]
    assert status["state"] == "connected", status
    assert {"add_note", "slow_note", "whoami", "die", "fail"} <= set(status["tools"])
    schema = {t.name: t.input_schema for t in manager.servers["my_notes_"].tools}["add_note"]
    assert schema["required"] == ["text"]
    assert await manager.call("my_notes_.add_note", {"text": "hello"}) == ("noted: hello", False)
    assert effects(log) == ["note:hello"]
    text, is_error = await manager.call("my_notes_.fail", {"reason": "because"})
    assert is_error and "because" in text


async def test_unknown_tool_and_unknown_server_are_clear(manager, tmp_path):
    await manager.apply(settings({"notes": stdio_config(tmp_path / "e.log")}))
    await manager.wait_ready()
    with pytest.raises(McpCallError, match="has no tool 'nope'") as info:
        await manager.call("notes.nope", {})
    assert info.value.outcome_unknown is False
    assert manager.find("other.tool") is None and not mcp_client.is_tool("other.tool")


async def test_a_server_that_dies_mid_call_is_a_clear_error_and_reconnects(manager, tmp_path):
    log = tmp_path / "effects.log"
    await manager.apply(settings({"notes": stdio_config(log)}))
    await manager.wait_ready()
    with pytest.raises(McpCallError, match="connection closed") as info:
        await manager.call("notes.die", {})
    assert info.value.outcome_unknown is True
    assert manager.servers["notes"].state == "failed"
    # the next call starts the server again
    assert await manager.call("notes.add_note", {"text": "after"}) == ("noted: after", False)
    assert effects(log) == ["die", "note:after"]


async def test_a_server_answering_garbage_is_a_clear_error(manager, tmp_path):
    log = tmp_path / "effects.log"
    await manager.apply(settings({"junk": garbage_config(log)}))
    await manager.wait_ready()
    assert manager.status()["servers"][0]["tools"] == ["echo"]
    with pytest.raises(McpCallError, match="not a valid MCP result") as info:
        await manager.call("junk.echo", {})
    assert info.value.outcome_unknown is True
    assert effects(log) == ["garbage-call"]


async def test_a_server_that_cannot_start_reports_its_error(manager, tmp_path):
    bad = {"command": str(tmp_path / "no-such-program"), "args": []}
    await manager.apply(settings({"broken": bad, "nothing": {"args": []}}))
    await manager.wait_ready()
    rows = {row["name"]: row for row in manager.status()["servers"]}
    assert rows["broken"]["state"] == "failed" and rows["broken"]["error"]
    assert rows["nothing"]["state"] == "failed"
    assert "needs a 'command'" in rows["nothing"]["error"]
    with pytest.raises(McpCallError, match="not connected"):
        await manager.call("broken.anything", {})


async def test_streamable_http_with_a_bearer_token(manager, tmp_path):
    log = tmp_path / "effects.log"
    with http_mcp_server(log, token=TOKEN) as url:
        config = {
            "url": url,
            "type": "streamable-http",
            "headers": {"Authorization": f"Bearer {TOKEN}"},
        }
        wrong = {"url": url, "headers": {"Authorization": "Bearer wrong-t0ken-value"}}
        await manager.apply(settings({"remote": config, "denied": wrong}))
        await manager.wait_ready()
        rows = {row["name"]: row for row in manager.status()["servers"]}
        assert rows["remote"]["state"] == "connected", rows
        assert rows["denied"]["state"] == "failed"
        assert "wrong-t0ken-value" not in str(rows)  # credentials are masked in errors
        assert await manager.call("remote.add_note", {"text": "http"}) == ("noted: http", False)
    assert effects(log) == ["note:http"]


async def test_sse_transport(manager, tmp_path):
    log = tmp_path / "effects.log"
    with http_mcp_server(log, transport="sse") as url:
        await manager.apply(settings({"old": {"url": url, "type": "sse"}}))
        await manager.wait_ready()
        assert manager.status()["servers"][0]["state"] == "connected"
        assert await manager.call("old.add_note", {"text": "sse"}) == ("noted: sse", False)
    assert effects(log) == ["note:sse"]


async def test_credentials_are_registered_as_secrets_and_masked(manager, tmp_path):
    env_key = "env-api-key-0123456789"
    config = stdio_config(tmp_path / "e.log", MCP_TEST_API_KEY=env_key, MODE="production")
    await manager.apply(settings({"notes": config}))
    await manager.wait_ready()
    text, _ = await manager.call("notes.whoami", {})
    assert text == f"my key is {env_key}"  # the server got the real value
    assert secrets.mask(text) == "my key is §§secret(MCP_NOTES_MCP_TEST_API_KEY)"
    assert secrets.mask("production") == "production"  # not every env value is a secret
    await manager.apply(settings({}))
    assert secrets.mask(env_key) == env_key  # gone with the server


async def test_changed_config_reconnects_and_disabled_stays_off(manager, tmp_path):
    log = tmp_path / "effects.log"
    await manager.apply(settings({"notes": stdio_config(log)}))
    await manager.wait_ready()
    first = manager.servers["notes"]
    await manager.apply(settings({"notes": stdio_config(log)}))  # unchanged: kept
    assert manager.servers["notes"] is first
    await manager.apply(settings({"notes": {**stdio_config(log), "disabled": True}}))
    assert manager.servers["notes"].state == "disabled"
    assert first.state == "stopped"


async def test_missing_sdk_is_reported_not_fatal(manager, tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_client, "sdk_available", lambda: False)
    await manager.apply(settings({"notes": stdio_config(tmp_path / "e.log")}))
    row = manager.status()["servers"][0]
    assert row["state"] == "failed" and "requirements.txt" in row["error"]
    assert row["error_code"] == "mcp_sdk_missing"
