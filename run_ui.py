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

import os


def _begin_journal_check() -> None:
    """Start the SQLite journal's integrity check now, on a thread and a connection of its
    own, so that it reads the file while the modules below load; the journal waits for its
    verdict when it opens (durability/store/sqlite_check.py). A shared worker has no such file."""
    if os.environ.get("A0_DURABILITY_POSTGRES_DSN", "").strip():
        return
    from durability.paths import journal_path
    from durability.store import sqlite_check
    from python.helpers.files import usr_dir

    sqlite_check.begin(journal_path(usr_dir()))


if __name__ == "__main__":
    _begin_journal_check()

import argparse
import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import uvicorn

BASE_DIR = Path(__file__).resolve().parent
if str(BASE_DIR) not in sys.path:
    sys.path.insert(0, str(BASE_DIR))

from python.server import auth, log_safety
from python.server.app import build_app
from python.server.runtime import Runtime

__all__ = ["build_app", "end_gc_pause", "main", "parse_args", "shared_mode"]
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
    log_safety.install()  # after uvicorn's Config set up its loggers
    server = _Server(config, runtime)
    mode = "SQLite journal" if shared is None else f"shared worker {shared.worker_id}"
    logger.info("serving on http://%s:%s (data in %s, %s)", args.host, args.port, usr, mode)
    server.run()
    if not server.started:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
