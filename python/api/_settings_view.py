"""What the settings endpoints show: every setting, with secrets replaced by 'is it set'."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from python.helpers import settings as settings_mod

SECRET_SETTINGS = settings_mod.SECRET_SETTINGS
API_KEY_PREFIX = settings_mod.API_KEY_FIELD


def provider_ids() -> list[str]:
    from python.helpers.models import load_providers

    return sorted(load_providers())


async def settings_view(settings: dict[str, Any], usr: Path) -> dict[str, Any]:
    """{settings, secrets: {name: bool}, api_keys: {provider: bool}, providers: [...]}."""

    def build() -> dict[str, Any]:
        providers = provider_ids()
        view = settings_mod.public_view(settings, usr, providers)
        view["providers"] = providers
        return view

    return await asyncio.to_thread(build)
