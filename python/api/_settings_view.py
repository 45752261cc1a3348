"""What the settings endpoints show: every setting, with secrets replaced by 'is it set'."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from python.helpers import settings as settings_mod

SECRET_SETTINGS = settings_mod.SECRET_SETTINGS
API_KEY_PREFIX = settings_mod.API_KEY_FIELD
_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (dict, "object"), (str, "text"))


def provider_ids() -> list[str]:
    from python.helpers.models import load_providers

    return sorted(load_providers())


def field_types() -> dict[str, dict[str, Any]]:
    """{name: {type, default, secret}} for every setting, from the defaults' types."""
    fields = {}
    for name, default in settings_mod.DEFAULTS.items():
        kind = next(label for cls, label in _TYPES if isinstance(default, cls))
        secret = name in SECRET_SETTINGS
        fields[name] = {"type": kind, "default": "" if secret else default, "secret": secret}
    return fields


def env_defaults(usr: Path, environ: Mapping[str, str] | None = None) -> list[str]:
    """Settings whose default comes from an ``A0_SET_<name>`` (the environment or usr/.env).
    As upstream, that is only a default: a value saved in settings.json wins over it."""
    env = os.environ if environ is None else environ
    names = set(settings_mod.env_defaults(env)) | set(
        settings_mod.env_defaults(settings_mod.read_env_file(usr))
    )
    return sorted(names)


async def settings_view(settings: dict[str, Any], usr: Path) -> dict[str, Any]:
    """{settings, secrets: {name: bool}, api_keys: {provider: bool}, providers: [...],
    fields: {name: {type, default, secret}}, env_defaults: [names]}."""

    def build() -> dict[str, Any]:
        providers = provider_ids()
        view = settings_mod.public_view(settings, usr, providers)
        view["providers"] = providers
        view["fields"] = field_types()
        view["env_defaults"] = env_defaults(usr)
        return view

    return await asyncio.to_thread(build)
