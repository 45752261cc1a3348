"""Login, CSRF tokens, origin checks and the external API key: the request guards."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from dotenv import dotenv_values
from starlette.requests import Request

from python.helpers.api import ApiError, ApiHandler

SESSION_AUTH_KEY = "authentication"
SESSION_CSRF_KEY = "csrf_token"
DEFAULT_ALLOWED_HOSTS = ("localhost", "127.0.0.1", "0.0.0.0", "[::1]", "::1")


def _env_value(name: str, usr: Path, environ: Mapping[str, str]) -> str:
    value = environ.get(name)
    if value:
        return value
    env_file = usr / ".env"
    if env_file.is_file():
        # literally, as settings.py reads it: ``${VAR}`` is never expanded
        return (dotenv_values(env_file, interpolate=False).get(name) or "").strip()
    return ""


@dataclass(frozen=True)
class AuthConfig:
    """Login credentials (hashed) and allowed origins, read once at start-up."""

    login: str = ""
    password_digest: str = field(default="", repr=False)
    allowed_origins: tuple[str, ...] = ()

    @classmethod
    def load(cls, usr: Path, environ: Mapping[str, str] | None = None) -> AuthConfig:
        env = os.environ if environ is None else environ
        login = _env_value("AUTH_LOGIN", usr, env)
        password = _env_value("AUTH_PASSWORD", usr, env)
        origins = _env_value("ALLOWED_ORIGINS", usr, env)
        digest = credentials_digest(login, password) if login else ""
        allowed = tuple(o.strip().rstrip("/") for o in origins.split(",") if o.strip())
        return cls(login=login, password_digest=digest, allowed_origins=allowed)

    @property
    def login_required(self) -> bool:
        return bool(self.login)

    def check_credentials(self, login: str, password: str) -> bool:
        return self.login_required and hmac.compare_digest(
            credentials_digest(login, password), self.password_digest
        )


def credentials_digest(login: str, password: str) -> str:
    return hashlib.sha256(f"{login}:{password}".encode()).hexdigest()


def is_authenticated(request: Request, config: AuthConfig) -> bool:
    if not config.login_required:
        return True
    stored = request.session.get(SESSION_AUTH_KEY, "")
    return isinstance(stored, str) and hmac.compare_digest(stored, config.password_digest)


def csrf_token_for(request: Request) -> str:
    """The session's CSRF token, created on first use."""
    token = request.session.get(SESSION_CSRF_KEY)
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        request.session[SESSION_CSRF_KEY] = token
    return token


def _host_of(origin: str) -> str:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return ""
    return (parts.hostname or "").lower()


def origin_allowed(origin: str, config: AuthConfig) -> bool:
    """Loopback hosts always; others only when listed in ALLOWED_ORIGINS ('host:*' = any port)."""
    origin = origin.strip().rstrip("/")
    host = _host_of(origin)
    if not host:
        return False
    if host in DEFAULT_ALLOWED_HOSTS:
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass
    for allowed in config.allowed_origins:
        if allowed == "*" or allowed == origin:
            return True
        if allowed.endswith(":*") and _host_of(allowed[:-2]) == host:
            return True
    return False


def is_loopback_client(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def api_key_from(request: Request, body: Mapping[str, object] | None) -> str:
    key = request.headers.get("x-api-key", "")
    if not key and body is not None:
        candidate = body.get("api_key")
        key = candidate if isinstance(candidate, str) else ""
    return key


def check_api_key(provided: str, expected: str) -> None:
    """Refuse every call when no token is configured, or when it does not match."""
    if not expected:
        raise ApiError("unauthorized", "The external API is disabled (no mcp_server_token).", 401)
    if not provided or not hmac.compare_digest(provided.encode(), expected.encode()):
        raise ApiError("unauthorized", "Invalid or missing API key.", 401)


def check_csrf(request: Request, config: AuthConfig) -> None:
    if not config.login_required:
        check_origin(request, config)
    expected = request.session.get(SESSION_CSRF_KEY)
    provided = request.headers.get("x-csrf-token", "")
    if not isinstance(expected, str) or not expected or not provided:
        raise ApiError("csrf_failed", "Missing CSRF token; GET /api/csrf_token first.", 403)
    if not hmac.compare_digest(provided.encode(), expected.encode()):
        raise ApiError("csrf_failed", "Invalid CSRF token.", 403)


def check_origin(request: Request, config: AuthConfig) -> None:
    origin = request.headers.get("origin", "")
    if not origin and request.headers.get("referer"):
        parts = urlsplit(request.headers["referer"])
        origin = f"{parts.scheme}://{parts.netloc}"
    if origin and not origin_allowed(origin, config):
        raise ApiError("forbidden", "Origin not allowed; see ALLOWED_ORIGINS.", 403)


async def guard_request(
    handler_cls: type[ApiHandler], request: Request, config: AuthConfig, api_token: str
) -> None:
    """Apply the handler's flags in order: loopback, API key, login, CSRF."""
    if handler_cls.requires_loopback and not is_loopback_client(request):
        raise ApiError("forbidden", "This endpoint only answers loopback clients.", 403)
    if handler_cls.requires_api_key:
        body = None
        if "x-api-key" not in request.headers:
            from python.helpers.api import read_input

            body = await read_input(request)
        check_api_key(api_key_from(request, body), api_token)
        return
    if handler_cls.requires_auth and not is_authenticated(request, config):
        raise ApiError("unauthorized", "Log in first.", 401)
    if handler_cls.csrf_required():
        check_csrf(request, config)
