"""POST /api/settings_set: save settings (and API keys to usr/.env); empty secrets are kept."""

from __future__ import annotations

import asyncio
from typing import Any

from python.api._settings_view import API_KEY_PREFIX, SECRET_SETTINGS, settings_view
from python.helpers.api import ApiError, ApiHandler, bad_request, get_dict


class SettingsSet(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        from python.helpers import settings as settings_mod

        changes = get_dict(input, "settings") if "settings" in input else dict(input)
        known = set(settings_mod.DEFAULTS)
        values: dict[str, Any] = {}
        for name, value in changes.items():
            secret = name in SECRET_SETTINGS or name.startswith(API_KEY_PREFIX)
            if secret and (value is None or value == ""):
                continue  # an empty secret field means "unchanged"
            if name not in known and not name.startswith(API_KEY_PREFIX):
                raise bad_request(f"unknown setting '{name}'")
            values[name] = value
        try:
            saved = await asyncio.to_thread(settings_mod.save, values, self.runtime.usr)
        except settings_mod.SettingsError as exc:
            raise ApiError("invalid_setting", exc.message, 400) from None
        self.runtime.settings = dict(saved) if saved else await self.runtime.reload_settings()
        self.runtime.apply_settings_to_chats()
        return await settings_view(self.runtime.settings, self.runtime.usr)
