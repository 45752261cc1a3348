"""POST /api/settings_set: save settings (and API keys to usr/.env); empty secrets are kept.

Every value is checked before anything is written; a refusal names each field at fault
(``error.field`` the first, ``error.fields`` all of them: {name: message}) so that the
Settings dialog can show each message next to its field.
"""

from __future__ import annotations

import asyncio
from typing import Any

from python.api._settings_view import API_KEY_PREFIX, SECRET_SETTINGS, settings_view
from python.server.api import ApiError, ApiHandler, get_dict


def _invalid(errors: dict[str, str], code: str = "invalid_setting") -> ApiError:
    first = next(iter(errors))
    message = "; ".join(errors.values())
    return ApiError(code, message, field=first, fields=errors)


class SettingsSet(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        from python.helpers import settings as settings_mod

        changes = get_dict(input, "settings") if "settings" in input else dict(input)
        known = set(settings_mod.DEFAULTS)
        values: dict[str, Any] = {}
        unknown: dict[str, str] = {}
        invalid: dict[str, str] = {}
        for name, value in changes.items():
            secret = name in SECRET_SETTINGS or name.startswith(API_KEY_PREFIX)
            if secret and (value is None or value == ""):
                continue  # an empty secret field means "unchanged"
            if name not in known and not name.startswith(API_KEY_PREFIX) and name != "api_keys":
                unknown[name] = f"unknown setting '{name}'"
                continue
            if name in known and name not in SECRET_SETTINGS:
                try:
                    value = settings_mod.coerce(name, value)
                except settings_mod.SettingsError as exc:
                    invalid[name] = exc.message
                    continue
            values[name] = value
        if unknown:
            raise _invalid(unknown, "bad_request")
        if invalid:
            raise _invalid(invalid)
        try:
            saved = await asyncio.to_thread(settings_mod.save, values, self.runtime.usr)
        except settings_mod.SettingsError as exc:
            raise _invalid({exc.name or "settings": exc.message}) from None
        self.runtime.settings = dict(saved) if saved else await self.runtime.reload_settings()
        self.runtime.apply_settings_to_chats()
        await self.runtime.apply_mcp()  # a changed mcp_servers reconnects
        return await settings_view(self.runtime.settings, self.runtime.usr)
