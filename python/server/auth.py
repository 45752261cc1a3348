"""Login, CSRF tokens, origin checks and the external API key: the request guards.

Sessions live in the journal's database (durability/web_sessions.py); the cookie carries
only their random id (python/server/web_session.py). docs/security.md has the whole model.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from dotenv import dotenv_values
from starlette.requests import Request

from python.server import credentials, web_session
from python.server.api import ApiHandler
from python.server.errors import ApiError

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
#: Addresses that mean "every interface": never a name a browser sends as Host.
ANY_ADDRESS = ("0.0.0.0", "::", "")
DEFAULT_TRUSTED_PROXIES = "127.0.0.1"


def _env_value(name: str, usr: Path, environ: Mapping[str, str]) -> str:
    value = environ.get(name)
    if value:
        return value
    env_file = usr / ".env"
    if env_file.is_file():
        # literally, as settings.py reads it: ``${VAR}`` is never expanded
        return (dotenv_values(env_file, interpolate=False).get(name) or "").strip()
    return ""


def _split(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


@dataclass(frozen=True)
class AuthConfig:
    """Login (its scrypt verifier), allowed hosts and origins, trusted proxies; read once."""

    login: str = ""
    verifier: str = field(default="", repr=False)
    allowed_origins: tuple[str, ...] = ()
    #: Host names besides loopback (ALLOWED_HOSTS, the bind address, ALLOWED_ORIGINS' hosts)
    allowed_hosts: tuple[str, ...] = ()
    #: Peers whose X-Forwarded-For / X-Forwarded-Proto count (FORWARDED_ALLOW_IPS)
    trusted_proxies: str = DEFAULT_TRUSTED_PROXIES
    #: The sessions' generation of the previous start, when the credentials changed since
    previous_generation: str | None = None

    @classmethod
    def from_password(cls, login: str, password: str, **others: object) -> AuthConfig:
        verifier = credentials.make_verifier(password) if login else ""
        return cls(login=login, verifier=verifier, **others)  # type: ignore[arg-type]

    @classmethod
    def load(
        cls, usr: Path, environ: Mapping[str, str] | None = None, *, bind_host: str | None = None
    ) -> AuthConfig:
        """From the environment and usr/.env. ``bind_host`` is the address the server
        listens on: it is an allowed Host, and when it is not loopback and no login is set,
        the first start makes a one-time password (python/server/credentials.py)."""
        env = os.environ if environ is None else environ

        def value(name: str) -> str:
            return _env_value(name, usr, env)

        origins = tuple(o.rstrip("/") for o in _split(value("ALLOWED_ORIGINS")))
        hosts = [h.lower() for h in _split(value("ALLOWED_HOSTS"))]
        hosts += [_host_of(o) for o in origins if o != "*" and _host_of(o.removesuffix(":*"))]
        if bind_host is not None and bind_host.strip("[]") not in ANY_ADDRESS:
            hosts.append(bind_host.strip("[]").lower())
        resolved = credentials.resolve(
            usr,
            value("AUTH_LOGIN"),
            value("AUTH_PASSWORD"),
            {credentials.OPT_OUT: value(credentials.OPT_OUT)},
            bind_host,
        )
        if resolved.generated_password:
            credentials.announce(
                resolved.login,
                resolved.generated_password,
                bind_host or "",
                usr / credentials.LOGIN_FILE,
            )
        return cls(
            login=resolved.login,
            verifier=resolved.verifier,
            allowed_origins=origins,
            allowed_hosts=tuple(dict.fromkeys(h for h in hosts if h)),
            trusted_proxies=value("FORWARDED_ALLOW_IPS") or DEFAULT_TRUSTED_PROXIES,
            previous_generation=resolved.previous_generation,
        )

    @property
    def login_required(self) -> bool:
        return bool(self.login)

    @property
    def generation(self) -> str:
        """The fingerprint of these credentials that every session is made under."""
        return credentials.generation_of(self.login, self.verifier)

    def check_credentials(self, login: str, password: str) -> bool:
        """Constant-time: the login compared with ``compare_digest``, the password through
        scrypt even when the login is wrong."""
        if not self.login_required:
            return False
        same_login = hmac.compare_digest(login.encode("utf-8", "replace"), self.login.encode())
        return credentials.check_verifier(self.verifier, password) and same_login


async def is_authenticated(request: Request, config: AuthConfig) -> bool:
    if not config.login_required:
        return True
    session = await web_session.current(request)
    return session is not None and session.authenticated


async def csrf_token_for(request: Request) -> str:
    """The session's CSRF token (a session is made when there is none)."""
    return (await web_session.ensure(request)).csrf_token


def _host_of(origin: str) -> str:
    try:
        parts = urlsplit(origin if "://" in origin else f"http://{origin}")
        return (parts.hostname or "").lower()
    except ValueError:
        return ""


def _netloc_of(origin: str) -> str:
    try:
        return urlsplit(origin).netloc.lower()
    except ValueError:
        return ""


def origin_allowed(origin: str, config: AuthConfig, host_header: str = "") -> bool:
    """Loopback origins, the server's own origin (the same host and port as the request's
    allowed ``Host``), and those listed in ALLOWED_ORIGINS ('host:*' = any port)."""
    origin = origin.strip().rstrip("/")
    host = _host_of(origin)
    if not host or "://" not in origin:
        return False
    if host_header and _netloc_of(origin) == host_header.strip().lower():
        return True
    if host in LOOPBACK_HOSTS:
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
    """The key from the ``X-API-KEY`` header, else from a JSON body's ``api_key`` (as
    upstream's external API); never from the URL (``refuse_key_in_url``)."""
    key = request.headers.get("x-api-key", "")
    if not key and body is not None:
        candidate = body.get("api_key")
        key = candidate if isinstance(candidate, str) else ""
    return key


def refuse_key_in_url(request: Request) -> None:
    """A key in the query string ends up in logs, histories and Referer headers: refused."""
    if "api_key" in request.query_params:
        message = "Send the API key in the X-API-KEY header, never in the URL."
        raise ApiError("api_key_in_url", message)


def body_may_hold_key(request: Request) -> bool:
    """Only a JSON body may carry ``api_key`` (upstream's external API); a form never does,
    so an upload without the header is refused before any of it is read."""
    content_type = request.headers.get("content-type", "").lower()
    return not content_type.startswith(("multipart/", "application/x-www-form-urlencoded"))


def check_api_key(provided: str, expected: str) -> None:
    """Refuse every call when no token is configured, or when it does not match."""
    if not expected:
        raise ApiError("unauthorized", "The external API is disabled (no mcp_server_token).")
    if not provided or not hmac.compare_digest(provided.encode(), expected.encode()):
        raise ApiError("unauthorized", "Invalid or missing API key.")


async def check_csrf(request: Request, config: AuthConfig) -> None:
    check_origin(request, config)
    session = await web_session.current(request)
    expected = session.csrf_token if session is not None else ""
    provided = request.headers.get("x-csrf-token", "")
    if not expected or not provided:
        raise ApiError("csrf_failed", "Missing CSRF token; GET /api/csrf_token first.")
    if not hmac.compare_digest(provided.encode(), expected.encode()):
        raise ApiError("csrf_failed", "Invalid CSRF token.")


def check_origin(request: Request, config: AuthConfig) -> None:
    """A request that names an origin (``Origin``, else ``Referer``) must name an allowed
    one: reads as much as writes, with login on or off."""
    origin = request.headers.get("origin", "")
    if not origin and request.headers.get("referer"):
        parts = urlsplit(request.headers["referer"])
        origin = f"{parts.scheme}://{parts.netloc}"
    if origin and not origin_allowed(origin, config, request.headers.get("host", "")):
        raise ApiError("forbidden", "Origin not allowed; see ALLOWED_ORIGINS.")


async def guard_request(
    handler_cls: type[ApiHandler], request: Request, config: AuthConfig, api_token: str
) -> None:
    """Apply the handler's flags in order: loopback, API key, login, CSRF."""
    if handler_cls.requires_loopback and not is_loopback_client(request):
        raise ApiError("forbidden", "This endpoint only answers loopback clients.")
    if handler_cls.requires_api_key:
        refuse_key_in_url(request)
        key = request.headers.get("x-api-key", "")
        if not key and api_token and body_may_hold_key(request):
            from python.server.api import read_input  # the body, within its size limit

            key = api_key_from(request, await read_input(request))
        check_api_key(key, api_token)
        return
    check_origin(request, config)
    if handler_cls.requires_auth and not await is_authenticated(request, config):
        raise ApiError("unauthorized", "Log in first.")
    if handler_cls.csrf_required():
        await check_csrf(request, config)
