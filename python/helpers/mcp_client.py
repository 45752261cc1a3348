"""MCP client: one connection per server of the ``mcp_servers`` setting, through the
official ``mcp`` SDK (stdio, streamable HTTP and SSE).

The server process starts the connections in the background at start-up
(``Runtime.start``) and again whenever the setting changes; nothing waits for them except
the system prompt, which waits (bounded by the init time-out) for the first attempt so
that a turn sees the tools. A connection that fails or dies is reconnected on the next
call. The SDK is in the default install (requirements.txt); an install without it still
works: a configured server reports ``mcp_sdk_missing`` and the rest of the agent runs.

Calls go through ``Agent.execute_tool`` like every tool (python/tools/_mcp.py), so they are
journaled with policy ``hold``: no adapter can prove what a server did.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from python.helpers import files, mcp_config, secrets
from python.helpers.mcp_config import HTTP, SSE, STDIO, ServerConfig

logger = logging.getLogger("a0.mcp")

SDK_HINT = "the 'mcp' package is not installed: pip install -r requirements.txt"
MAX_RESULT_CHARS = 20_000
LOG_TAIL_BYTES = 8_000
CONNECTION_CLOSED, REQUEST_TIMEOUT = -32000, -32001  # JSON-RPC codes of the SDK


SDK_MODULES = (
    "anyio",
    "httpx2",
    "mcp",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.client.sse",
)


def sdk_available() -> bool:
    return importlib.util.find_spec("mcp") is not None


async def load_sdk() -> None:
    """Import the SDK in a thread: its import takes about a second of CPU, which must not
    stall the event loop that serves HTTP and runs every chat."""

    def load() -> None:
        for name in SDK_MODULES:
            importlib.import_module(name)

    await asyncio.to_thread(load)


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input_schema: dict[str, Any]


class McpCallError(Exception):
    """A call that gave no usable result. ``outcome_unknown``: the server may have acted."""

    code = "mcp_call_failed"

    def __init__(self, message: str, *, outcome_unknown: bool) -> None:
        super().__init__(message)
        self.message = message
        self.outcome_unknown = outcome_unknown


def _describe(exc: BaseException) -> str:
    """One masked line for an exception (the first leaf of an exception group)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return str(secrets.mask(f"{type(exc).__name__}: {text}" if text else type(exc).__name__))


def format_result(result: Any) -> tuple[str, bool]:
    """(text for the model, is_error) from a CallToolResult."""
    parts: list[str] = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(getattr(item, "text", "")))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(item, 'mime_type', '') or 'unknown type'}]")
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource: {resource}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {getattr(item, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True, default=str))
    text = "\n".join(parts).strip()
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[... {len(text) - MAX_RESULT_CHARS} characters cut]"
    return text, bool(getattr(result, "is_error", False))


def log_path(name: str) -> Path:
    """Where a stdio server's stderr goes (private to usr/)."""
    folder = files.usr_dir() / "mcp"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder / f"{name}.stderr.log"


class ServerState(StrEnum):
    """Where one server's connection is (``/api/mcp_servers_status`` shows it)."""

    IDLE = "idle"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    FAILED = "failed"
    DISABLED = "disabled"
    STOPPED = "stopped"


@dataclass
class ServerConnection:
    """One server: its connection task, state, tools and last error."""

    config: ServerConfig
    init_timeout: float
    tool_timeout: float
    state: ServerState = ServerState.IDLE
    error: str = ""
    error_code: str = ""  # mcp_config_error | mcp_sdk_missing | mcp_connect_failed | ...
    tools: list[McpTool] = field(default_factory=list)
    connected_at: float | None = None
    session: Any = None
    _task: asyncio.Task | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _closing: asyncio.Event = field(default_factory=asyncio.Event)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def name(self) -> str:
        return self.config.name

    def startable(self) -> bool:
        return not self.config.error and not self.config.disabled and sdk_available()

    def start(self) -> None:
        """Begin connecting in the background (never waits)."""
        if self.config.disabled:
            self.state, self.error = ServerState.DISABLED, ""
            self._ready.set()
            return
        if self.config.error or not sdk_available():
            self.state, self.error = ServerState.FAILED, self.config.error or SDK_HINT
            self.error_code = "mcp_config_error" if self.config.error else "mcp_sdk_missing"
            self._ready.set()
            return
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self.state, self.error, self.error_code = ServerState.CONNECTING, "", ""
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp-{self.name}")

    async def _run(self) -> None:
        try:
            await load_sdk()
            import anyio
            from mcp import ClientSession

            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open(stack)
                session = await stack.enter_async_context(ClientSession(read, write))
                with anyio.fail_after(self.init_timeout):
                    await session.initialize()
                    self.tools = await self._list_tools(session)
                self.session, self.state, self.error = session, ServerState.CONNECTED, ""
                self.connected_at = time.time()
                self._ready.set()
                logger.info("MCP server %s connected, %d tools", self.name, len(self.tools))
                await self._closing.wait()
        except asyncio.CancelledError:
            self.state = ServerState.STOPPED
            raise
        except (Exception, BaseExceptionGroup) as exc:  # the SDK's task groups raise groups
            if not self._closing.is_set():
                self.state, self.error = ServerState.FAILED, _describe(exc)
                self.error_code = "mcp_connect_failed"
                logger.warning("MCP server %s: %s", self.name, self.error)
        finally:
            self.session = None
            if self.state in (ServerState.CONNECTED, ServerState.CONNECTING):
                self.state = ServerState.STOPPED if self._closing.is_set() else ServerState.FAILED
                if self.state == ServerState.FAILED and not self.error:
                    self.error, self.error_code = "the connection ended", "mcp_connection_lost"
            self._ready.set()

    async def _open(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        cfg = self.config
        if cfg.kind == STDIO:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=secrets.unmask(cfg.command),
                args=[secrets.unmask(a) for a in cfg.args],
                env={k: secrets.unmask(v) for k, v in cfg.env.items()} or None,
                cwd=cfg.cwd or None,
            )
            path = log_path(cfg.name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            errlog = stack.enter_context(open(fd, "a", encoding="utf-8"))  # noqa: SIM115
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        elif cfg.kind == HTTP:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = {k: secrets.unmask(v) for k, v in cfg.headers.items()}
            client = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
            )
            url = secrets.unmask(cfg.url)
            streams = await stack.enter_async_context(
                streamable_http_client(url, http_client=client)
            )
        elif cfg.kind == SSE:
            from mcp.client.sse import sse_client

            headers = {k: secrets.unmask(v) for k, v in cfg.headers.items()}
            streams = await stack.enter_async_context(
                sse_client(secrets.unmask(cfg.url), headers=headers, timeout=self.init_timeout)
            )
        else:  # pragma: no cover - mcp_config only makes the three kinds
            raise ValueError(f"unknown server kind {cfg.kind}")
        return streams[0], streams[1]

    async def _list_tools(self, session: Any) -> list[McpTool]:
        tools: list[McpTool] = []
        cursor = None
        while True:
            if cursor is None:
                listed = await session.list_tools()
            else:
                from mcp import types

                listed = await session.list_tools(
                    params=types.PaginatedRequestParams(cursor=cursor)
                )
            for tool in listed.tools:
                schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
                tools.append(McpTool(tool.name, tool.description or "", schema))
            cursor = getattr(listed, "next_cursor", None)
            if not cursor:
                return tools

    async def wait_ready(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._ready.wait()

    async def stop(self, timeout: float = 5.0) -> None:
        self._closing.set()
        task, self._task = self._task, None
        if task is not None and not task.done():
            done, _ = await asyncio.wait({task}, timeout=timeout)
            if not done:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self.state = ServerState.STOPPED if self.state != ServerState.DISABLED else self.state

    def _lost(self, reason: str) -> None:
        """The connection is unusable: tear it down; the next call reconnects."""
        self.state, self.error, self.error_code = ServerState.FAILED, reason, "mcp_connection_lost"
        self.session = None
        self._closing.set()

    async def ensure_connected(self) -> Any:
        async with self._lock:
            if self.session is not None and self.state == ServerState.CONNECTED:
                return self.session
            if self.state == ServerState.CONNECTING:
                await self.wait_ready(self.init_timeout + 1)
            elif self.startable():
                if self._task is not None and not self._task.done():
                    await self.stop()
                self.start()
                await self.wait_ready(self.init_timeout + 1)
            if self.session is None:
                why = self.error or self.state
                raise McpCallError(
                    f"MCP server '{self.name}' is not connected ({why})", outcome_unknown=False
                )
            return self.session

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Call one tool; returns (text, is_error) or raises McpCallError."""
        session = await self.ensure_connected()
        if self.tools and tool not in {t.name for t in self.tools}:
            names = ", ".join(t.name for t in self.tools)
            raise McpCallError(
                f"MCP server '{self.name}' has no tool '{tool}' (it has: {names})",
                outcome_unknown=False,
            )
        import anyio

        try:
            with anyio.fail_after(self.tool_timeout + 5):
                result = await session.call_tool(tool, args, read_timeout_seconds=self.tool_timeout)
        except TimeoutError:
            raise McpCallError(
                f"no answer within {self.tool_timeout:g} s", outcome_unknown=True
            ) from None
        except Exception as exc:
            raise self._call_error(exc) from None
        return format_result(result)

    def _call_error(self, exc: Exception) -> McpCallError:
        error = getattr(exc, "error", None)
        code = getattr(error, "code", None)
        if code == REQUEST_TIMEOUT:
            return McpCallError(f"no answer within {self.tool_timeout:g} s", outcome_unknown=True)
        if code == CONNECTION_CLOSED:
            self._lost("the connection closed during a call")
            return McpCallError(
                "the server's connection closed during the call (it may have stopped or crashed)",
                outcome_unknown=True,
            )
        if code is not None:  # the server answered with a JSON-RPC error: it is alive
            message = secrets.mask(str(getattr(error, "message", exc)))
            return McpCallError(f"the server refused the call: {message}", outcome_unknown=False)
        if isinstance(exc, ValueError):  # pydantic: the answer is not a valid MCP result
            return McpCallError(
                f"the server's answer is not a valid MCP result ({_describe(exc)})",
                outcome_unknown=True,
            )
        self._lost(_describe(exc))
        return McpCallError(f"the call failed: {_describe(exc)}", outcome_unknown=True)

    def status(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "name": cfg.name,
            "type": cfg.kind,
            "description": cfg.description,
            "state": self.state,
            "connected": self.state == ServerState.CONNECTED,
            "disabled": cfg.disabled,
            "tool_count": len(self.tools) if self.state == ServerState.CONNECTED else 0,
            "tools": [t.name for t in self.tools] if self.state == ServerState.CONNECTED else [],
            "error": str(secrets.mask(self.error)) if self.error else "",
            "error_code": self.error_code if self.error else "",
            "connected_at": self.connected_at,
        }


class McpManager:
    """Every configured server of this process (one manager per process: :func:`manager`)."""

    def __init__(self) -> None:
        self.servers: dict[str, ServerConnection] = {}
        self.config_error = ""

    def configured(self) -> bool:
        return bool(self.servers) or bool(self.config_error)

    async def apply(self, settings: dict[str, Any]) -> None:
        """Take the ``mcp_servers`` setting: register its credentials as secrets, stop the
        servers that went away or changed, start the new ones in the background."""
        try:
            configs = mcp_config.parse(settings.get("mcp_servers"))
            self.config_error = ""
        except mcp_config.McpConfigError as exc:
            configs, self.config_error = [], exc.message
            logger.warning("mcp_servers: %s", exc.message)
        secrets.set_extra_secrets("mcp", mcp_config.credentials(configs))
        init = float(settings.get("mcp_client_init_timeout") or 10)
        call = float(settings.get("mcp_client_tool_timeout") or 120)
        wanted = {c.name: c for c in configs}
        for name, conn in list(self.servers.items()):
            new = wanted.get(name)
            if new is None or new.identity() != conn.config.identity():
                await conn.stop()
                del self.servers[name]
        for cfg in configs:
            init_timeout = cfg.init_timeout or init
            tool_timeout = cfg.tool_timeout or call
            running = self.servers.get(cfg.name)
            if running is not None:
                running.init_timeout, running.tool_timeout = init_timeout, tool_timeout
                continue
            conn = ServerConnection(cfg, init_timeout, tool_timeout)
            self.servers[cfg.name] = conn
            conn.start()
        # keep the configured order (the system prompt lists servers in it)
        self.servers = {c.name: self.servers[c.name] for c in configs if c.name in self.servers}

    async def wait_ready(self) -> None:
        """Wait for the servers still connecting, each at most its init time-out."""
        pending = [c for c in self.servers.values() if c.state == ServerState.CONNECTING]
        if pending:
            await asyncio.gather(*(c.wait_ready(c.init_timeout + 1) for c in pending))

    def find(self, full_name: str) -> tuple[ServerConnection, str] | None:
        """The server and tool of ``<server>.<tool>``, when that server is configured."""
        server, dot, tool = full_name.partition(".")
        conn = self.servers.get(server) if dot and tool else None
        return (conn, tool) if conn is not None else None

    async def call(self, full_name: str, args: dict[str, Any]) -> tuple[str, bool]:
        found = self.find(full_name)
        if found is None:
            raise McpCallError(
                f"no MCP server is configured for '{full_name}'", outcome_unknown=False
            )
        conn, tool = found
        return await conn.call(tool, args)

    def connected(self) -> list[ServerConnection]:
        return [c for c in self.servers.values() if c.state == ServerState.CONNECTED and c.tools]

    def status(self) -> dict[str, Any]:
        return {
            "sdk_available": sdk_available(),
            "config_error": self.config_error,
            "servers": [c.status() for c in self.servers.values()],
        }

    def detail(self, name: str) -> dict[str, Any] | None:
        conn = self.servers.get(name)
        if conn is None:
            return None
        tools = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in conn.tools
        ]
        return {**conn.status(), "tools": tools, "log": _log_tail(conn.config)}

    async def close(self) -> None:
        conns, self.servers = list(self.servers.values()), {}
        await asyncio.gather(*(c.stop() for c in conns), return_exceptions=True)


def _log_tail(config: ServerConfig) -> str:
    if config.kind != STDIO:
        return ""
    path = files.usr_dir() / "mcp" / f"{config.name}.stderr.log"
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return str(secrets.mask(text))


_manager = McpManager()


def manager() -> McpManager:
    return _manager


def is_tool(full_name: str) -> bool:
    """True when ``<server>.<tool>`` names a tool of a configured server (``Agent.get_tool``
    then builds python/tools/_mcp.py's McpToolCall for it)."""
    return "." in full_name and _manager.find(full_name) is not None
