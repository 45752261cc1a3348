"""POST /api/mcp_server_get_detail: one MCP server with its tools' input schemas and the
end of its stderr log (masked)."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiError, ApiHandler, get_str


class McpServerGetDetail(ApiHandler):
    accepts_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        from python.helpers import mcp_client

        name = get_str(input, "server_name", required=True)
        detail = mcp_client.manager().detail(name)
        if detail is None:
            raise ApiError("mcp_server_not_found", f"No MCP server named '{name}'.")
        return {"server": detail}
