"""What can be known about a model before anything is sent to it (#23).

``problem(config, has_key, kind)`` reads the configuration only: a provider the table does
not know (with no base URL of its own), no base URL, a malformed one, no model name, no API
key where the provider needs one. ``check(client, kind)`` adds one network fact: the first
call of a process to an endpoint first opens (and closes) a TCP connection to it; a refused
connection (or a host name that does not resolve) is tried again with backoff, and when it
never succeeds the model is not reachable as configured. A slow or silent server proves
nothing here (the call itself decides). Nothing of the request is ever sent by a check.

The durable seam (python/durable/seams.py) asks ``check`` before it records a model call's
intent: a ``ModelNotConfigured`` there fails the turn with a clear error instead of holding
a call that never left (DESIGN.md section 5).
"""

from __future__ import annotations

import asyncio
import socket
import urllib.parse
import urllib.request

from python.helpers.models import (
    CONNECT_RETRIES,
    ModelClient,
    ModelConfig,
    ModelNotConfigured,
    resolve_provider,
)

PROBE_TIMEOUT = 5.0  # seconds: a silent server proves nothing, the call itself decides

_reached: set[tuple[str, int]] = set()  # endpoints this process has connected to


def key_variable(provider: str) -> str:
    """The usr/.env name of a provider's key (``API_KEY_OPENAI``)."""
    return "API_KEY_" + "".join(c if c.isalnum() else "_" for c in provider).upper()


def _prefix(kind: str) -> str:
    return "util_model" if kind == "utility" else "chat_model"


def _base_url(config: ModelConfig, entry: dict) -> str:
    return (config.api_base or str(entry.get("api_base") or "")).strip()


def problem(config: ModelConfig, has_key: bool, kind: str = "chat") -> ModelNotConfigured | None:
    """The first thing that stops a call to this model as configured, or None."""
    prefix = _prefix(kind)
    which = "utility model" if kind == "utility" else "chat model"
    provider = config.provider.strip()
    _pid, entry = resolve_provider(provider) if provider else ("", {})
    if not provider or (not entry and not config.api_base.strip()):
        return ModelNotConfigured(
            f"the {which}'s provider '{provider}' is not one this server knows; pick one in "
            f"Settings, or set the model's API base URL for an OpenAI-compatible server",
            reason="unknown_provider",
            setting=f"{prefix}_provider",
            kind=kind,
        )
    base = _base_url(config, entry)
    if not base:
        return ModelNotConfigured(
            f"the {which} has no API base URL (provider '{provider}' needs one): "
            f"set {prefix}_api_base in Settings",
            reason="no_api_base",
            setting=f"{prefix}_api_base",
            kind=kind,
        )
    if endpoint(base) is None:
        return ModelNotConfigured(
            f"the {which}'s API base URL '{base[:200]}' is not an http:// or https:// URL "
            "with a host name",
            reason="malformed_api_base",
            setting=f"{prefix}_api_base",
            kind=kind,
        )
    if not config.name.strip():
        return ModelNotConfigured(
            f"the {which} has no model name: set {prefix}_name in Settings",
            reason="no_model_name",
            setting=f"{prefix}_name",
            kind=kind,
        )
    if not has_key and entry.get("key_required", True):
        variable = key_variable(provider)
        return ModelNotConfigured(
            f"no API key for the {which}'s provider '{provider}': add it in Settings "
            f"(API keys) or set {variable} in usr/.env",
            reason="no_api_key",
            setting=variable,
            kind=kind,
        )
    return None


def endpoint(base: str) -> tuple[str, int] | None:
    """(host, port) of an http(s) base URL; None when it is not one."""
    try:
        parts = urllib.parse.urlsplit(base)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if any(c.isspace() for c in base):
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


async def _connect_once(host: str, port: int) -> None:
    _reader, writer = await asyncio.wait_for(
        asyncio.open_connection(host, port), timeout=PROBE_TIMEOUT
    )
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass


async def check(client: ModelClient, kind: str = "chat") -> None:
    """Raise ``ModelNotConfigured`` when the model cannot be called as configured; see the
    module docstring. Sends nothing of any request."""
    config = client.config
    found = problem(config, client.has_key, kind)
    if found is not None:
        raise found
    base = _base_url(config, client.provider)
    target = endpoint(base)
    if target is None or target in _reached:
        return
    if urllib.request.getproxies().get(urllib.parse.urlsplit(base).scheme):
        return  # the connection goes to the proxy: it proves nothing about the server
    for attempt in range(CONNECT_RETRIES + 1):
        try:
            await _connect_once(*target)
        except (ConnectionRefusedError, socket.gaierror) as exc:
            if attempt < CONNECT_RETRIES:
                await asyncio.sleep(client.connect_delay * 2**attempt)
                continue
            refused = isinstance(exc, ConnectionRefusedError)
            which = "utility model" if kind == "utility" else "chat model"
            what = "refused the connection" if refused else "has a host name that does not resolve"
            raise ModelNotConfigured(
                f"the {which}'s server at {base[:200]} {what}: is it running, and is the "
                f"API base URL in Settings right?",
                reason="connection_refused" if refused else "host_not_found",
                setting=f"{_prefix(kind)}_api_base",
                kind=kind,
            ) from None
        except (TimeoutError, OSError):
            return  # silent or otherwise unreachable: proves nothing, the call decides
        _reached.add(target)
        return


def forget_reached() -> None:
    """Probe every endpoint again (settings changed; tests)."""
    _reached.clear()
