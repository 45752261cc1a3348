"""The session cookie: a random id that names a server-side session (durability/web_sessions.py).

``SessionCookies`` (an ASGI middleware) reads the cookie and sets or clears it on the
response; the session itself is looked up only when a guard asks (``current``), so static
files cost no database read. The cookie is HttpOnly, SameSite=Strict, and Secure when the
request came over HTTPS (directly, or said so by a trusted proxy: FORWARDED_ALLOW_IPS).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection, cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durability.web_sessions import MAX_AGE_SECONDS, WebSession

if TYPE_CHECKING:  # pragma: no cover
    from durability.web_sessions import WebSessions

SCOPE_KEY = "a0.web_session"
_UNSET = object()


@dataclass
class _State:
    """One request's view of its session (kept in the ASGI scope)."""

    store: WebSessions | None
    cookie_id: str
    secure: bool
    found: object = _UNSET  # WebSession | None once looked up
    new_cookie: str | None = None  # the value to set ("" clears the cookie)


def _cookie_value(scope: Scope, name: str) -> str:
    """The cookie ``name`` (Starlette's lenient parser: other sites' odd cookies on the same
    host name never hide ours)."""
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            found = cookie_parser(value.decode("latin-1")).get(name)
            if found:
                return found
    return ""


class SessionCookies:
    """Put the session's state into the scope; write the cookie when it changed."""

    def __init__(
        self, app: ASGIApp, *, cookie_name: str, store: Callable[[], WebSessions | None]
    ) -> None:
        self.app = app
        self.cookie_name = cookie_name
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = _State(
            store=self.store(),
            cookie_id=_cookie_value(scope, self.cookie_name),
            secure=scope.get("scheme") == "https",
        )
        scope[SCOPE_KEY] = state

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and state.new_cookie is not None:
                headers = MutableHeaders(scope=message)
                headers.append("set-cookie", self._header(state.new_cookie, state.secure))
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _header(self, value: str, secure: bool) -> str:
        max_age = int(MAX_AGE_SECONDS) if value else 0
        parts = [f"{self.cookie_name}={value}", "Path=/", f"Max-Age={max_age}", "HttpOnly"]
        parts.append("SameSite=Strict")
        if secure:
            parts.append("Secure")
        return "; ".join(parts)


def _state(conn: HTTPConnection) -> _State:
    state = conn.scope.get(SCOPE_KEY)
    if not isinstance(state, _State):
        raise RuntimeError("SessionCookies middleware is not installed")
    return state


def _store(state: _State) -> WebSessions:
    if state.store is None:
        raise RuntimeError("the session store is not open (the server has not started)")
    return state.store


async def current(conn: HTTPConnection) -> WebSession | None:
    """The request's live session, or None."""
    state = _state(conn)
    if state.found is _UNSET:
        found = None
        if state.cookie_id and state.store is not None:
            found = await state.store.find(state.cookie_id)
        state.found = found
    return state.found if isinstance(state.found, WebSession) else None


async def ensure(conn: HTTPConnection) -> WebSession:
    """The request's session, made (not logged in) when it has none."""
    session = await current(conn)
    if session is None:
        state = _state(conn)
        session = await _store(state).create(authenticated=False)
        state.found, state.new_cookie = session, session.session_id
    return session


async def log_in(conn: HTTPConnection) -> WebSession:
    """A new logged-in session with a new id and CSRF token; the old one is revoked."""
    state = _state(conn)
    store = _store(state)
    old = await current(conn)
    if old is not None:
        await store.revoke(old.session_id)
    session = await store.create(authenticated=True)
    state.found, state.new_cookie = session, session.session_id
    return session


async def log_out(conn: HTTPConnection) -> None:
    """Delete the session (a replayed cookie opens nothing) and clear the cookie."""
    state = _state(conn)
    if state.cookie_id and state.store is not None:
        await state.store.revoke(state.cookie_id)
    state.found, state.new_cookie = None, ""
