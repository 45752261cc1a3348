"""POST /api/mcp_servers_apply: save a new ``mcp_servers`` value and reconnect; answers with
the servers' status (the connections go on in the background)."""

from __future__ import annotations

import asyncio
from typing import Any

from python.server.api import ApiError, ApiHandler, bad_request


class McpServersApply(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        from python.helpers import mcp_client
        from python.helpers import settings as settings_mod

        value = input.get("mcp_servers")
        if not isinstance(value, str | dict | list):
            raise bad_request("'mcp_servers' must be JSON text (or an object)")
        try:
            saved = await asyncio.to_thread(
                settings_mod.save, {"mcp_servers": value}, self.runtime.usr
            )
        except settings_mod.SettingsError as exc:
            raise ApiError("invalid_setting", exc.message) from None
        self.runtime.settings = dict(saved)
        self.runtime.apply_settings_to_chats()
        await self.runtime.apply_mcp()
        return {"mcp_servers": saved["mcp_servers"], **mcp_client.manager().status()}
