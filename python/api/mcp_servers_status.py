"""POST /api/mcp_servers_status: every configured MCP server, its state, tools and last error."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiHandler


class McpServersStatus(ApiHandler):
    accepts_api_key = True
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        from python.helpers import mcp_client

        return mcp_client.manager().status()
