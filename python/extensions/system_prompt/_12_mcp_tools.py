"""system_prompt: the tools of the connected MCP servers (agent.system.mcp_tools.md).

Each tool is listed as ``<server>.<tool>`` with its description and input schema (keys
sorted, so the prompt is the same at every build: a resumed run compares it with the
journal). The first turn after start-up waits, bounded by each server's init time-out,
for the servers still connecting."""

from __future__ import annotations

import json
from typing import Any

from python.helpers import mcp_client
from python.helpers.extensions import Extension


def server_section(conn: mcp_client.ServerConnection) -> str:
    title = f"## {conn.name}" + (f": {conn.config.description}" if conn.config.description else "")
    parts = [title]
    for tool in conn.tools:
        schema = json.dumps(tool.input_schema, ensure_ascii=False, sort_keys=True)
        lines = [f"### {conn.name}.{tool.name}"]
        if tool.description.strip():
            lines.append(tool.description.strip())
        lines.append(f"Arguments (JSON schema): {schema}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


class McpToolsPrompt(Extension):
    async def execute(self, system_prompt: list[str] | None = None, **kwargs: Any) -> None:
        manager = mcp_client.manager()
        if system_prompt is None or not manager.configured():
            return
        await manager.wait_ready()
        sections = [server_section(conn) for conn in manager.connected()]
        if sections:
            text = "\n\n".join(sections)
            system_prompt.append(self.agent.read_prompt("agent.system.mcp_tools.md", tools=text))
