"""The Host allowlist: a request whose ``Host`` header names another server is refused.

A page on another site that re-points its own name at this server (DNS rebinding) sends
its own name as ``Host`` and no ``Origin``; refusing unknown hosts is what stops it. The
loopback names are always allowed; ALLOWED_HOSTS adds names (``*.example.com`` matches
sub-domains, ``*`` any host), and so do the bind address (unless it is every interface)
and the hosts of ALLOWED_ORIGINS (python/server/auth.py builds the list).
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from python.server.errors import error_response

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_name(header: str) -> str | None:
    """The host of a ``Host`` header without its port, lower-case; None when malformed."""
    value = header.strip().lower()
    if not value or any(c in value for c in "/\\@ \t?#"):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not value[end + 1 :].startswith(":")):
            return None
        name, port = value[1:end], value[end + 2 :]
    else:
        name, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return name or None


class HostAllowlist:
    """ASGI middleware: 400 ``host_not_allowed`` unless ``Host`` names an allowed host."""

    def __init__(self, app: ASGIApp, *, allowed: Iterable[str]) -> None:
        self.app = app
        names = {n.strip().strip("[]").lower() for n in (*LOOPBACK_NAMES, *allowed)}
        self.any = "*" in names
        self.exact = {n for n in names if n and not n.startswith("*")}
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))

    def allows(self, header: str) -> bool:
        name = host_name(header)
        if name is None:
            return False
        return self.any or name in self.exact or name.endswith(self.suffixes or ("\0",))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = ""
        for key, value in scope.get("headers", ()):
            if key == b"host":
                header = value.decode("latin-1")
                break
        if self.allows(header):
            await self.app(scope, receive, send)
            return
        response = error_response(
            "host_not_allowed",
            "This server does not answer to that host name; add it to ALLOWED_HOSTS.",
        )
        await response(scope, receive, send)
