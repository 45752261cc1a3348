"""The ``mcp_servers`` setting: upstream Agent Zero's JSON format, parsed and checked.

    {"mcpServers": {"<name>": {"command": "...", "args": [...], "env": {...}},
                    "<name>": {"url": "...", "headers": {...}, "type": "streamable-http"}}}

A list of server objects (each with a ``name``) is accepted too. Names are normalised as
upstream does (lower case, every non-word character becomes ``_``); the model calls a
tool as ``<server>.<tool>``. A bad entry does not spoil the others: it becomes a server
with an ``error`` that the status endpoint shows. Nothing here imports the MCP SDK.

Credentials: values of ``env`` entries whose name looks secret (KEY, TOKEN, SECRET, PASS,
AUTH, ...), every header value except a few harmless ones, and a password in the URL are
secrets (:func:`credentials`): they are masked like API keys before anything is logged,
journaled or shown. A value may also be written ``§§secret(NAME)`` (a name from
usr/secrets.env or the environment); it is resolved only when the server is started.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

STDIO, HTTP, SSE = "stdio", "streamable_http", "sse"
HTTP_SPELLINGS = {
    "streamable-http",
    "streamable_http",
    "http-stream",
    "streaming-http",
    "http-streaming",
    "http",
    "streamablehttp",
}
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|AUTH|CRED|COOKIE|SESSION|PRIVATE|SIGN|DSN")
_PLAIN_HEADERS = {
    "accept",
    "accept-language",
    "accept-encoding",
    "content-type",
    "user-agent",
    "cache-control",
    "mcp-protocol-version",
}
_SCHEMES = ("bearer ", "basic ", "token ")
DEFAULT_TEXT = '{"mcpServers": {}}'


class McpConfigError(ValueError):
    """The whole setting cannot be read (not JSON, wrong shape); ``code`` is stable."""

    code = "invalid_setting"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class ServerConfig:
    """One configured server. ``error`` set: the entry is unusable and is not started."""

    name: str
    kind: str = STDIO  # stdio | streamable_http | sse
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    description: str = ""
    disabled: bool = False
    init_timeout: float | None = None
    tool_timeout: float | None = None
    error: str = ""

    def identity(self) -> str:
        """Everything that decides the connection: a change means reconnect."""
        return json.dumps(self.__dict__, sort_keys=True, default=str)


def normalize_name(name: str) -> str:
    """Upstream's rule: lower case, every non-word character becomes ``_``."""
    return re.sub(r"\W", "_", name.strip().lower())


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'{what}' must be an object of strings")
    return {str(k): str(v) for k, v in value.items() if v is not None}


def _timeout(value: Any, what: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"'{what}' must be a number of seconds") from None
    if not number > 0:
        raise ValueError(f"'{what}' must be above 0")
    return number


def _server(name: str, raw: Any) -> ServerConfig:
    config = ServerConfig(name=name)
    if not isinstance(raw, dict):
        config.error = "the server entry must be an object"
        return config
    try:
        config.description = str(raw.get("description") or "")
        config.disabled = raw.get("disabled") is True or str(raw.get("disabled")).lower() == "true"
        config.init_timeout = _timeout(raw.get("init_timeout"), "init_timeout")
        config.tool_timeout = _timeout(raw.get("tool_timeout"), "tool_timeout")
        url = raw.get("url") or raw.get("serverUrl")
        if raw.get("command"):
            config.kind = STDIO
            config.command = str(raw["command"])
            args = raw.get("args") or []
            if not isinstance(args, list):
                raise ValueError("'args' must be a list of strings")
            config.args = [str(a) for a in args]
            config.env = _string_map(raw.get("env"), "env")
            config.cwd = str(raw.get("cwd") or "")
        elif url:
            config.url = str(url)
            if urlsplit(config.url).scheme not in ("http", "https"):
                raise ValueError("'url' must be an http:// or https:// URL")
            config.headers = _string_map(raw.get("headers"), "headers")
            kind = str(raw.get("type") or raw.get("transport") or "").strip().lower()
            if kind == "sse" or (
                not kind and urlsplit(config.url).path.rstrip("/").endswith("/sse")
            ):
                config.kind = SSE
            elif not kind or kind in HTTP_SPELLINGS:
                config.kind = HTTP
            else:
                raise ValueError(f"unknown 'type' {kind!r}: use 'sse' or 'streamable-http'")
        else:
            raise ValueError("the server needs a 'command' (local) or a 'url' (remote)")
    except ValueError as exc:
        config.error = str(exc)
    return config


def parse(text: str | dict | list | None) -> list[ServerConfig]:
    """The servers in the setting's text; raises McpConfigError when it cannot be read."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return []
    if isinstance(text, str):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise McpConfigError(f"mcp_servers is not valid JSON: {exc}") from None
    else:
        data = text
    if isinstance(data, dict) and "mcpServers" in data:
        data = data["mcpServers"]
    entries: list[tuple[str, Any]]
    if isinstance(data, dict):
        entries = [(str(k), v) for k, v in data.items()]
    elif isinstance(data, list):
        entries = [(str(e.get("name") or "") if isinstance(e, dict) else "", e) for e in data]
    else:
        raise McpConfigError('mcp_servers must be {"mcpServers": {name: config}} or a list')
    servers: list[ServerConfig] = []
    seen: set[str] = set()
    for index, (raw_name, raw) in enumerate(entries):
        name = normalize_name(raw_name)
        if not name:
            servers.append(ServerConfig(name=f"server_{index}", error="the server needs a name"))
            continue
        if name in seen:
            servers.append(
                ServerConfig(name=f"{name}_{index}", error=f"a second server is named '{name}'")
            )
            continue
        seen.add(name)
        servers.append(_server(name, raw))
    return servers


def validate(text: str) -> None:
    """For saving: the text must be readable and every server entry usable."""
    bad = [f"{s.name}: {s.error}" for s in parse(text) if s.error]
    if bad:
        raise McpConfigError("mcp_servers has unusable entries: " + "; ".join(bad))


def _secret_name(server: str, part: str) -> str:
    return "MCP_" + re.sub(r"[^A-Za-z0-9]", "_", f"{server}_{part}").upper()


def credentials(servers: list[ServerConfig]) -> dict[str, str]:
    """Secret name -> value for every credential in the servers' env, headers and URLs."""
    found: dict[str, str] = {}
    for server in servers:
        for key, value in server.env.items():
            if _SECRET_ENV.search(key.upper()):
                found[_secret_name(server.name, key)] = value
        for key, value in server.headers.items():
            if key.lower() in _PLAIN_HEADERS:
                continue
            found[_secret_name(server.name, key)] = value
            lowered = value.lower()
            for scheme in _SCHEMES:
                if lowered.startswith(scheme) and len(value) > len(scheme):
                    found[_secret_name(server.name, key + "_value")] = value[len(scheme) :].strip()
        if server.url:
            parts = urlsplit(server.url)
            if parts.password:
                found[_secret_name(server.name, "url_password")] = parts.password
            for key, value in parse_qsl(parts.query):
                if _SECRET_ENV.search(key.upper()):
                    found[_secret_name(server.name, "url_" + key)] = value
    return {k: v for k, v in found.items() if v and "§§secret(" not in v}
