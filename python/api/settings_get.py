"""POST /api/settings_get: current settings; secrets and API keys only as 'set' flags."""

from __future__ import annotations

from typing import Any

from python.api._settings_view import settings_view
from python.server.api import ApiHandler


class SettingsGet(ApiHandler):
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        settings = await self.runtime.reload_settings()
        return await settings_view(settings, self.runtime.usr)
