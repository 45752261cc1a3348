"""What the settings endpoints show: every setting, with secrets replaced by 'is it set'."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

SECRET_SETTINGS = ("mcp_server_token",)
API_KEY_PREFIX = "api_key_"


def provider_ids() -> list[str]:
    try:
        from python.helpers.models import load_providers

        return sorted(load_providers())
    except Exception:
        return ["other", "openai", "anthropic", "openrouter", "ollama"]


def _key_present(provider: str, usr: Path) -> bool:
    from python.helpers import settings as settings_mod

    try:
        return bool(settings_mod.get_api_key(provider, usr))
    except Exception:
        return False


async def settings_view(settings: dict[str, Any], usr: Path) -> dict[str, Any]:
    """{settings, secrets: {name: bool}, api_keys: {provider: bool}, providers: [...]}."""
    visible = {
        k: v
        for k, v in settings.items()
        if k not in SECRET_SETTINGS and not k.startswith(API_KEY_PREFIX)
    }
    providers = provider_ids()
    keys = await asyncio.to_thread(lambda: {p: _key_present(p, usr) for p in providers})
    return {
        "settings": visible,
        "secrets": {name: bool(settings.get(name)) for name in SECRET_SETTINGS},
        "api_keys": keys,
        "providers": providers,
    }
