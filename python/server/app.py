"""The HTTP surface of one server process: the Starlette app over a ``Runtime``.

Routes (``/api/<name>`` for each handler of python/api, ``/login``, ``/logout``, the
static web UI), the middleware (security headers, proxy headers, body limits, the host
allowlist, the API-key rate limit, the session cookie) and the exception handlers: every
error that leaves a route or a middleware becomes a response through
python/server/errors.py, the one code -> status table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from durability.errors import DurabilityError
from durability.web_sessions import WebSessions
from python.helpers.errors import DomainError
from python.helpers.files import BASE_DIR
from python.server import auth, http_headers, http_limits, rate_limits, web_session
from python.server.api import ApiHandler, discover_handlers, make_endpoint
from python.server.errors import ApiError, error_response, exception_to_response
from python.server.hosts import HostAllowlist
from python.server.rate_limits import ApiKeyLimit, FailureLimit
from python.server.runtime import Runtime

WEBUI_DIR = BASE_DIR / "webui"
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
logger = logging.getLogger("a0.run_ui")


def build_app(
    runtime: Runtime,
    handlers: dict[str, type[ApiHandler]] | None = None,
    *,
    secret_key: str | None = None,
    cookie_suffix: str = "",
    limits: http_limits.BodyLimits | None = None,
) -> Starlette:
    """The whole HTTP surface: /api/<name>, /login, /logout and the static web UI.

    ``secret_key`` is accepted for callers of the signed-cookie era and not used: sessions
    live in the journal (durability/web_sessions.py), so they outlast restarts anyway.
    ``limits`` bound request bodies (default: the A0_HTTP_* settings, docs/security.md)."""
    handlers = discover_handlers() if handlers is None else handlers
    sessions: list[WebSessions] = []  # opened with the runtime (lifespan)
    login_limit = FailureLimit(rate_limits.LOGIN_BURST, rate_limits.LOGIN_PER_MINUTE)
    api_key_limit = FailureLimit(rate_limits.API_KEY_BURST, rate_limits.API_KEY_PER_MINUTE)
    limits = http_limits.BodyLimits.load(runtime.usr) if limits is None else limits

    async def guard(handler_cls: type[ApiHandler], request: Request) -> None:
        auth.refuse_key_in_url(request)
        if handler_cls.accepts_api_key and request.headers.get("x-api-key"):
            if handler_cls.requires_loopback and not auth.is_loopback_client(request):
                raise ApiError("forbidden", "This endpoint only answers loopback clients.")
            auth.check_api_key(request.headers["x-api-key"], runtime.api_token)
            return  # an API key replaces the session and the CSRF token
        await auth.guard_request(handler_cls, request, runtime.auth, runtime.api_token)

    def api_key_attempt(scope: Any) -> bool:
        """Does this request try an API key (the ones ApiKeyLimit counts)?"""
        path = str(scope.get("path", ""))
        handler_cls = handlers.get(path[5:]) if path.startswith("/api/") else None
        if handler_cls is None:
            return False
        has_key = any(key == b"x-api-key" for key, _ in scope.get("headers", ()))
        return handler_cls.requires_api_key or (handler_cls.accepts_api_key and has_key)

    routes: list[Any] = [
        Route(f"/api/{name}", make_endpoint(cls, runtime, guard), methods=ALL_METHODS)
        for name, cls in handlers.items()
    ]

    async def unknown_api(request: Request) -> Response:
        name = request.path_params["rest"]
        return error_response("not_found", f"No endpoint /api/{name}.")

    async def index(request: Request) -> Response:
        if not await auth.is_authenticated(request, runtime.auth):
            return RedirectResponse("/login", status_code=303)
        return FileResponse(WEBUI_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def login_page(request: Request) -> Response:
        if request.method == "GET":
            return FileResponse(WEBUI_DIR / "login.html", headers={"Cache-Control": "no-store"})
        client = rate_limits.client_of(request.scope)
        wait = login_limit.take(client)  # taken before the check: parallel tries count
        if wait:  # the right password too, until the bucket refills
            return rate_limits.too_many(wait, "logins")
        form = await http_limits.read_form(request, files=False)
        login, password = form.get("username", ""), form.get("password", "")
        check = runtime.auth.check_credentials  # scrypt: tens of ms, off the event loop
        if (
            isinstance(login, str)
            and isinstance(password, str)
            and await asyncio.to_thread(check, login, password)
        ):
            login_limit.give_back(client)
            await web_session.log_in(request)
            return RedirectResponse("/", status_code=303)
        return RedirectResponse("/login?error=1", status_code=303)

    async def logout(request: Request) -> Response:
        await web_session.log_out(request)
        return RedirectResponse("/login" if runtime.auth.login_required else "/", status_code=303)

    routes += [
        Route("/api/{rest:path}", unknown_api, methods=ALL_METHODS),
        Route("/", index),
        Route("/index.html", index),
        Route("/login", login_page, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["GET", "POST"]),
        Mount("/", app=StaticFiles(directory=WEBUI_DIR, check_dir=False), name="webui"),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException) or exc.status_code >= 500:
            return exception_to_response(exc)
        status = exc.status_code
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "bad_request")
        return error_response(code, str(exc.detail or "") or code, status=status)

    async def server_error(request: Request, exc: Exception) -> Response:
        return exception_to_response(exc)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        await runtime.start()
        try:
            sessions.append(await open_sessions(runtime))
            yield
        finally:
            await runtime.shutdown()

    middleware = [
        Middleware(http_headers.SecurityHeadersMiddleware),
        Middleware(ProxyHeadersMiddleware, trusted_hosts=runtime.auth.trusted_proxies),
        Middleware(http_limits.BodyLimitMiddleware, limits=limits),
        Middleware(HostAllowlist, allowed=runtime.auth.allowed_hosts),
        Middleware(ApiKeyLimit, limit=api_key_limit, attempt=api_key_attempt),
        Middleware(
            web_session.SessionCookies,
            cookie_name=f"a0_session{cookie_suffix}",
            store=lambda: sessions[-1] if sessions else None,
        ),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPException: http_error,
            DomainError: server_error,
            DurabilityError: server_error,
            500: server_error,
        },
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.login_limit = login_limit
    return app


async def open_sessions(runtime: Runtime) -> WebSessions:
    """The session store over the runtime's journal; sessions made under the previous
    credentials end here (a changed password logs everybody out)."""
    config = runtime.auth
    store = WebSessions(runtime.journal, config.generation)
    previous = config.previous_generation
    if previous is not None and previous != config.generation:
        ended = await WebSessions(runtime.journal, previous).revoke_generation()
        if ended:
            logger.info("the login changed: %d session(s) of the old one ended", ended)
    return store
