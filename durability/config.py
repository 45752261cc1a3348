"""Shared-worker settings, read once from the environment (docs/shared-workers.md), and
the SQLite journal's bound on deferred writes (``A0_JOURNAL_DEFER_MS``, docs/durability.md).

``shared_config(environ)`` returns None when ``A0_DURABILITY_POSTGRES_DSN`` is unset (the
default: one process, SQLite), else a validated :class:`SharedConfig`. Every refusal is a
``ConfigurationError`` (code ``invalid_configuration``) naming the variable; the DSN's
password and the resource key never appear in a message or a repr.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from durability.dsn import PostgresDsn
from durability.errors import ConfigurationError
from durability.store._group_commit import DEFAULT_DEFER_SECONDS

DSN = "A0_DURABILITY_POSTGRES_DSN"
NAMESPACE = "A0_DURABILITY_POSTGRES_NAMESPACE"
RESOURCE_KEY = "A0_DURABILITY_RESOURCE_KEY"
WORKER_ID = "A0_WORKER_ID"
LEASE_SECONDS = "A0_DURABILITY_LEASE_SECONDS"
HEARTBEAT_SECONDS = "A0_DURABILITY_HEARTBEAT_SECONDS"
RESOURCE_MAX_BYTES = "A0_DURABILITY_RESOURCE_MAX_BYTES"
POOL_SIZE = "A0_DURABILITY_POSTGRES_POOL_SIZE"

#: Every variable this module reads (docs/shared-workers.md documents each).
SETTINGS = (
    DSN,
    NAMESPACE,
    RESOURCE_KEY,
    WORKER_ID,
    LEASE_SECONDS,
    HEARTBEAT_SECONDS,
    RESOURCE_MAX_BYTES,
    POOL_SIZE,
)

DEFAULT_NAMESPACE = "agent_zero"
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_RESOURCE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_POOL_SIZE = 10
_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_WORKER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


class Secret:
    """A string that never prints: ``reveal()`` is the only way to the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret is not serialisable")


@dataclass(frozen=True)
class SharedConfig:
    dsn: PostgresDsn
    namespace: str
    resource_key: Secret
    worker_id: str
    lease_seconds: float
    heartbeat_seconds: float
    resource_max_bytes: int
    pool_size: int
    #: hold a liveness lock so a dead worker is taken over at once (A0_DURABILITY_LIVENESS;
    #: on by default; "false" leaves the lease alone to bound claims: docs/shared-workers.md)
    liveness: bool = True


def default_worker_id() -> str:
    """The host name plus a random suffix: two processes on one host never share an id."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname() or "worker")[:100] or "worker"
    return f"{host}-{secrets.token_hex(4)}"


def _number(
    environ: Mapping[str, str], name: str, default: float, low: float, high: float
) -> float:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number", setting=name) from None
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be between {low:g} and {high:g}", setting=name)
    return value


DEFER_MS = "A0_JOURNAL_DEFER_MS"


def journal_defer_seconds(environ: Mapping[str, str] | None = None) -> float:
    """How long a deferred result or checkpoint waits for a write to ride on before it
    commits on its own (``A0_JOURNAL_DEFER_MS``, 0 to 60000; 0 commits every write at
    once; default 5 ms)."""
    env = os.environ if environ is None else environ
    default_ms = DEFAULT_DEFER_SECONDS * 1000
    return _number(env, DEFER_MS, default_ms, 0.0, 60_000.0) / 1000


def shared_config(environ: Mapping[str, str] | None = None) -> SharedConfig | None:
    """Shared mode's settings, or None (single process) when no DSN is set."""
    env = os.environ if environ is None else environ
    dsn_text = env.get(DSN, "").strip()
    if not dsn_text:
        return None
    dsn = PostgresDsn(dsn_text)
    namespace = env.get(NAMESPACE, "").strip() or DEFAULT_NAMESPACE
    if not _NAMESPACE.match(namespace) or namespace.startswith("pg_"):
        raise ConfigurationError(
            f"{NAMESPACE} must be a lowercase SQL name (letters, digits, _; at most 63;"
            " not starting with pg_)",
            setting=NAMESPACE,
        )
    key_text = env.get(RESOURCE_KEY, "").strip()
    if not key_text:
        raise ConfigurationError(
            f"shared mode ({DSN} is set) needs {RESOURCE_KEY}: a Fernet key shared by every"
            " worker, which encrypts attachments and work folders in the database"
            " (docs/shared-workers.md says how to make one)",
            setting=RESOURCE_KEY,
        )
    from durability.crypto import ResourceCipher

    ResourceCipher(key_text)  # validates the key(s) now, not at the first upload
    worker_id = env.get(WORKER_ID, "").strip() or default_worker_id()
    if not _WORKER_ID.match(worker_id):
        raise ConfigurationError(
            f"{WORKER_ID} must be 1-128 characters: letters, digits and . _ : @ -",
            setting=WORKER_ID,
        )
    lease = _number(env, LEASE_SECONDS, DEFAULT_LEASE_SECONDS, 1.0, 3600.0)
    heartbeat = _number(env, HEARTBEAT_SECONDS, lease / 3, 0.1, 3600.0)
    if heartbeat > lease / 2:
        raise ConfigurationError(
            f"{HEARTBEAT_SECONDS} must be at most half of {LEASE_SECONDS} (a claim must be"
            " renewed at least twice per lease)",
            setting=HEARTBEAT_SECONDS,
        )
    max_bytes = int(_number(env, RESOURCE_MAX_BYTES, DEFAULT_RESOURCE_MAX_BYTES, 0, 2**40))
    pool = int(_number(env, POOL_SIZE, DEFAULT_POOL_SIZE, 1, 1000))
    return SharedConfig(
        dsn=dsn,
        namespace=namespace,
        resource_key=Secret(key_text),
        worker_id=worker_id,
        lease_seconds=lease,
        heartbeat_seconds=heartbeat,
        resource_max_bytes=max_bytes,
        pool_size=pool,
        liveness=env.get("A0_DURABILITY_LIVENESS", "true").strip().lower()
        not in ("0", "false", "no", "off"),
    )
