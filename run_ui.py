"""Entry point: serve the web UI and the HTTP API on Starlette + uvicorn.

python run_ui.py [--host H] [--port P] [--key=value ...]
"""
# ruff: noqa: E402 - the imports follow the pause of the cyclic garbage collector

from __future__ import annotations

import gc

#: Run as a script, the cyclic garbage collector pauses while the modules load: they build
#: ~70,000 objects that live as long as the process, which it would walk ~100 times before
#: serving (~25 ms). ``main`` freezes them (never walked again) and resumes it.
_GC_PAUSED = __name__ == "__main__" and gc.isenabled()
if _GC_PAUSED:
    gc.disable()

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

BASE_DIR = Path(__file__).resolve().parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from durability.web_sessions import WebSessions
from python.durable.runtime import Runtime
from python.helpers import api as api_mod
from python.helpers import auth, rate_limits, web_session
from python.helpers.hosts import HostAllowlist
from python.helpers.rate_limits import ApiKeyLimit, FailureLimit

WEBUI_DIR = BASE_DIR / "webui"
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
logger = logging.getLogger("a0.run_ui")


def parse_args(
    argv: Sequence[str] | None = None, usr: Path | None = None
) -> tuple[argparse.Namespace, dict[str, str]]:
    """Known flags plus any extra --key=value pairs (kept as overrides, never an error).

    ``--host`` / ``--port`` default to ``WEB_UI_HOST`` / ``WEB_UI_PORT`` from the process
    environment, then from usr/.env (as upstream), then 127.0.0.1:5000."""
    from python.helpers import files, settings

    folder = files.usr_dir() if usr is None else usr
    host = settings.env_value("WEB_UI_HOST", folder) or "127.0.0.1"
    parser = argparse.ArgumentParser(description="Agent Zero (durable) web UI and API")
    parser.add_argument("--host", default=host)
    parser.add_argument(
        "--port", type=int, default=_env_port(settings.env_value("WEB_UI_PORT", folder))
    )
    args, unknown = parser.parse_known_args(argv)
    extras: dict[str, str] = {}
    for item in unknown:
        if item.startswith("--") and "=" in item:
            key, value = item[2:].split("=", 1)
            extras[key.replace("-", "_")] = value
        elif item.startswith("--"):
            extras[item[2:].replace("-", "_")] = "true"
    return args, extras


def _env_port(raw: str) -> int:
    try:
        return int(raw or 5000)
    except ValueError:
        logger.warning("WEB_UI_PORT=%r is not a port number; using 5000", raw)
        return 5000


def build_app(
    runtime: Runtime,
    handlers: dict[str, type[api_mod.ApiHandler]] | None = None,
    *,
    secret_key: str | None = None,
    cookie_suffix: str = "",
) -> Starlette:
    """The whole HTTP surface: /api/<name>, /login, /logout and the static web UI.

    ``secret_key`` is accepted for callers of the signed-cookie era and not used: sessions
    live in the journal (durability/web_sessions.py), so they outlast restarts anyway."""
    handlers = api_mod.discover_handlers() if handlers is None else handlers
    sessions: list[WebSessions] = []  # opened with the runtime (lifespan)
    login_limit = FailureLimit(rate_limits.LOGIN_BURST, rate_limits.LOGIN_PER_MINUTE)
    api_key_limit = FailureLimit(rate_limits.API_KEY_BURST, rate_limits.API_KEY_PER_MINUTE)

    async def guard(handler_cls: type[api_mod.ApiHandler], request: Request) -> None:
        if handler_cls.accepts_api_key and request.headers.get("x-api-key"):
            if handler_cls.requires_loopback and not auth.is_loopback_client(request):
                raise api_mod.ApiError(
                    "forbidden", "This endpoint only answers loopback clients.", 403
                )
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
        Route(f"/api/{name}", api_mod.make_endpoint(cls, runtime, guard), methods=ALL_METHODS)
        for name, cls in handlers.items()
    ]

    async def unknown_api(request: Request) -> Response:
        name = request.path_params["rest"]
        return api_mod.error_response("not_found", f"No endpoint /api/{name}.", 404)

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
        form = await request.form()
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
            return api_mod.exception_to_response(exc)
        status = exc.status_code
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "bad_request")
        return api_mod.error_response(code, str(exc.detail or "") or code, status)

    async def server_error(request: Request, exc: Exception) -> Response:
        return api_mod.exception_to_response(exc)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        await runtime.start()
        try:
            sessions.append(await open_sessions(runtime))
            yield
        finally:
            await runtime.shutdown()

    middleware = [
        Middleware(ProxyHeadersMiddleware, trusted_hosts=runtime.auth.trusted_proxies),
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
        exception_handlers={HTTPException: http_error, 500: server_error},
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


class _Server(uvicorn.Server):
    """uvicorn that cancels chat tasks at once on SIGTERM/SIGINT and then exits with 0."""

    def __init__(self, config: uvicorn.Config, runtime: Runtime) -> None:
        super().__init__(config)
        self.runtime = runtime

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:  # answering requests: the idle chats are rebuilt from now on
            self.runtime.serving()

    def handle_exit(self, sig: int, frame: Any) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()  # a clean stop is exit code 0, not a re-raised signal
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop().call_soon_threadsafe(self.runtime.begin_shutdown)


def _preload() -> None:
    """Import the loop and the model transport before serving, so first requests are fast."""
    import importlib

    for name in ("agent", "python.helpers.models"):
        try:
            importlib.import_module(name)
        except Exception:
            logger.exception("could not preload %s", name)


def end_gc_pause() -> None:
    """Freeze what start-up built so far (modules, classes, settings, the app: it lives as
    long as the process, so the collector never needs to walk it) and resume the cyclic
    garbage collector; a no-op unless run_ui.py paused it (run as a script). Called before
    the journal opens: chats, runs and anything removed later are collected as ever."""
    global _GC_PAUSED
    if _GC_PAUSED:
        _GC_PAUSED = False
        gc.freeze()
        gc.enable()


def shared_mode() -> Any:
    """The shared-worker settings (docs/shared-workers.md) or None (SQLite); a wrong or
    missing setting, or missing packages, end the start with a clear message (SystemExit).
    The DSN's password never appears in it."""
    if not os.environ.get("A0_DURABILITY_POSTGRES_DSN", "").strip():
        return None
    try:
        from durability.config import shared_config
        from durability.errors import ConfigurationError

        return shared_config(os.environ)
    except ImportError as exc:
        missing = exc.name or "a package"
        message = (
            f"shared mode (A0_DURABILITY_POSTGRES_DSN) needs {missing}: "
            "pip install -r requirements-postgres.txt"
        )
    except ConfigurationError as exc:
        message = f"shared mode refused to start: {exc.message} [{exc.code}]"
    logger.error(message)
    raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    args, extras = parse_args(argv)
    log_format = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=logging.INFO, format=log_format)
    from python.helpers import files, settings

    usr = files.usr_dir()
    shared = shared_mode()
    login = auth.AuthConfig.load(usr, bind_host=args.host)
    runtime = Runtime(usr, settings.load(usr), login, overrides=extras, shared=shared)
    if extras:
        logger.info("extra arguments kept as overrides: %s", ", ".join(sorted(extras)))
    _preload()
    app = build_app(runtime, cookie_suffix=f"_{args.port}")
    end_gc_pause()
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="info",
        timeout_graceful_shutdown=5,
        lifespan="on",
        proxy_headers=False,  # build_app applies them, from FORWARDED_ALLOW_IPS only
    )
    server = _Server(config, runtime)
    mode = "SQLite journal" if shared is None else f"shared worker {shared.worker_id}"
    logger.info("serving on http://%s:%s (data in %s, %s)", args.host, args.port, usr, mode)
    server.run()
    if not server.started:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
