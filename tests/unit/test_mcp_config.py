"""The mcp_servers setting in upstream's JSON format: parsing, names, credentials."""

from __future__ import annotations

import json

import pytest

from python.helpers import mcp_config, settings
from python.helpers.mcp_config import HTTP, SSE, STDIO, McpConfigError
from python.helpers.settings import SettingsError

pytestmark = pytest.mark.unit


def test_upstream_format_with_every_kind_of_server():
    text = json.dumps(
        {
            "mcpServers": {
                "GitHub Tools": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}},
                "remote-one": {
                    "url": "https://h/mcp",
                    "headers": {"X": "y"},
                    "type": "http-stream",
                },
                "legacy": {"serverUrl": "https://h/sse"},
                "plain": {"url": "https://h/mcp"},
                "off": {"command": "x", "disabled": True},
            }
        }
    )
    servers = {s.name: s for s in mcp_config.parse(text)}
    assert list(servers) == ["github_tools", "remote_one", "legacy", "plain", "off"]
    assert servers["github_tools"].kind == STDIO and servers["github_tools"].args == ["-y", "x"]
    assert servers["remote_one"].kind == HTTP and servers["remote_one"].headers == {"X": "y"}
    assert servers["legacy"].kind == SSE  # a URL ending in /sse without a type
    assert servers["plain"].kind == HTTP  # no type: streamable HTTP
    assert servers["off"].disabled
    assert not any(s.error for s in servers.values())


def test_a_list_of_servers_is_accepted_and_bad_entries_carry_their_error():
    servers = mcp_config.parse(
        [
            {"name": "ok", "command": "x"},
            {"name": "OK", "command": "y"},  # the same name once normalised
            {"command": "z"},
            {"name": "bad_type", "url": "https://h", "type": "carrier-pigeon"},
            {"name": "bad_url", "url": "ftp://h"},
            {"name": "bad_args", "command": "x", "args": "not a list"},
            {"name": "bad_timeout", "command": "x", "tool_timeout": -1},
        ]
    )
    errors = {s.name: s.error for s in servers}
    assert errors["ok"] == ""
    assert "second server is named 'ok'" in errors["ok_1"]
    assert "needs a name" in errors["server_2"]
    assert "unknown 'type'" in errors["bad_type"]
    assert "http://" in errors["bad_url"]
    assert "'args'" in errors["bad_args"]
    assert "above 0" in errors["bad_timeout"]


@pytest.mark.parametrize("text", ["{not json", "[1, 2", '"a string"', "42"])
def test_unreadable_setting_is_a_config_error(text):
    with pytest.raises(McpConfigError):
        mcp_config.parse(text)


def test_empty_setting_means_no_servers():
    assert mcp_config.parse("") == [] and mcp_config.parse(mcp_config.DEFAULT_TEXT) == []


def test_credentials_are_env_secrets_headers_and_url_passwords():
    servers = mcp_config.parse(
        {
            "mcpServers": {
                "gh": {
                    "command": "x",
                    "env": {
                        "GITHUB_TOKEN": "ghp-123456",
                        "MODE": "production",
                        "DB_PASSWORD": "pw-secret",
                        "REF": "§§secret(MY_REF)",
                    },
                },
                "api": {
                    "url": "https://user:url-pass-1@h/mcp?api_key=query-key-1&page=2",
                    "headers": {"Authorization": "Bearer tok-abcdef", "Accept": "text/plain"},
                },
            }
        }
    )
    assert mcp_config.credentials(servers) == {
        "MCP_GH_GITHUB_TOKEN": "ghp-123456",
        "MCP_GH_DB_PASSWORD": "pw-secret",
        "MCP_API_AUTHORIZATION": "Bearer tok-abcdef",
        "MCP_API_AUTHORIZATION_VALUE": "tok-abcdef",
        "MCP_API_URL_PASSWORD": "url-pass-1",
        "MCP_API_URL_API_KEY": "query-key-1",
    }


def test_settings_save_refuses_an_unusable_mcp_servers_value(tmp_path):
    with pytest.raises(SettingsError) as info:
        settings.save({"mcp_servers": "{broken"}, tmp_path)
    assert info.value.code == "invalid_setting" and info.value.name == "mcp_servers"
    with pytest.raises(SettingsError, match="needs a 'command'"):
        settings.save({"mcp_servers": {"mcpServers": {"x": {}}}}, tmp_path)
    saved = settings.save({"mcp_servers": {"mcpServers": {"x": {"command": "y"}}}}, tmp_path)
    assert json.loads(saved["mcp_servers"]) == {"mcpServers": {"x": {"command": "y"}}}
