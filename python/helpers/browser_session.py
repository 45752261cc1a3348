"""One chat's browser: headless Chromium driven by Playwright, with the chat's profile.

The profile is Playwright's storage state (cookies and local storage) in
``usr/browser/<context id>/state.json``: a private folder (0700), the file 0600, written
atomically after every action so that it survives a restart and a SIGKILL alike, and small
enough to travel to another worker (python/durable/shared.py stores it encrypted with the
work folder's resource key). ``reset`` deletes it.

Limits live here: every page operation runs under the action timeout; a browser that does
not answer within it, or crashed, is killed (by the process ids that carry this browser's
own marker switch, never by name) and reported as ``BrowserFailure``. Requests to
loopback, private, link-local or reserved addresses are aborted by Playwright request
routing unless ``browser_allow_private_addresses`` is on; downloads go only into the work
folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import signal
import socket
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from python.helpers import files

T = TypeVar("T")

DEFAULT_EXECUTABLE = "/usr/bin/chromium"
VIEWPORT = {"width": 1024, "height": 768}
STATE_FILE = "state.json"
MARKER_SWITCH = "--a0-browser-id"
LAUNCH_SECONDS = 60  # a cold Chromium start on a loaded machine


class BrowserFailure(Exception):
    """The browser could not do what was asked (a stable ``code`` and a clear message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


def _private(folder: Path) -> Path:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def chat_dir(context_id: str) -> Path:
    """The chat's private browser folder, ``usr/browser/<context id>`` (created 0700)."""
    safe = "".join(ch for ch in context_id if ch.isalnum() or ch in "-_") or "default"
    _private(files.usr_dir() / "browser")
    return _private(files.usr_dir() / "browser" / safe)


def profile_dir(context_id: str) -> Path:
    """The chat's profile (``state.json``): what moves to another worker with a run."""
    return _private(chat_dir(context_id) / "profile")


def screens_dir(context_id: str) -> Path:
    """The screenshots of the chat's browser steps (they stay on the worker that took them)."""
    return _private(chat_dir(context_id) / "screens")


def forget_profile(context_id: str, call_id: str) -> bool:
    """``reset: true``: the chat's cookies and local storage are gone. Once per call: a call
    resumed after a crash keeps what its earlier steps stored (``reset_by`` names it)."""
    folder = profile_dir(context_id)
    marker = chat_dir(context_id) / "reset_by"
    if marker.is_file() and marker.read_text(encoding="utf-8") == call_id:
        return False
    with contextlib.suppress(FileNotFoundError):
        (folder / STATE_FILE).unlink()
    files.write_atomic(marker, call_id, 0o600)
    return True


def _is_private(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_reserved
        or ip.is_multicast
        or ip.is_unspecified
    )


async def refusal(url: str, allow_private: bool) -> str | None:
    """Why ``url`` may not be opened (None: it may). Only http(s), about:blank and data:
    pages; hosts that resolve to a private address are refused unless allowed."""
    parts = urlsplit(url)
    if url == "about:blank" or parts.scheme in ("data", "blob"):
        return None
    if parts.scheme not in ("http", "https"):
        return f"only http and https pages may be opened, not '{parts.scheme}:'"
    host = parts.hostname or ""
    if not host:
        return "the URL names no host"
    if allow_private:
        return None
    try:
        infos = await asyncio.to_thread(socket.getaddrinfo, host, parts.port or 80)
    except OSError:
        return None  # unresolvable: the browser reports the network error itself
    for info in infos:
        if _is_private(str(info[4][0])):
            return (
                f"{host} is a loopback or private address; browser_allow_private_addresses is off"
            )
    return None


def _marked_pids(marker: str) -> list[int]:
    """Processes whose command line carries this browser's own marker switch."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry.name))
    return found


def kill_marked(marker: str) -> int:
    """SIGKILL every process of one browser (by pid); how many there were."""
    pids = [pid for pid in _marked_pids(marker) if pid != os.getpid()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


class BrowserSession:
    """A chat's open browser: one Chromium, one context with the chat's profile, one page."""

    def __init__(self, context_id: str, settings: dict[str, Any], workdir: Path) -> None:
        self.context_id = context_id
        self.settings = settings
        self.workdir = workdir
        self.marker = f"{MARKER_SWITCH}={uuid.uuid4().hex}"
        self.action_timeout = float(settings.get("browser_action_timeout") or 30)
        self.allow_private = bool(settings.get("browser_allow_private_addresses"))
        self._playwright: Any = None
        self._browser: Any = None
        self._context: Any = None
        self.page: Any = None
        self.crashed = False
        self.downloads: list[str] = []

    @property
    def state_path(self) -> Path:
        return profile_dir(self.context_id) / STATE_FILE

    @property
    def open(self) -> bool:
        return self.page is not None and not self.crashed

    async def start(self) -> None:
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise BrowserFailure(
                "browser_unavailable",
                "browser_agent needs Playwright for Python: pip install -r "
                "requirements-browser.txt (docs/browser.md)",
            ) from None
        executable = str(self.settings.get("browser_executable") or DEFAULT_EXECUTABLE).strip()
        if not Path(executable).is_file():
            raise BrowserFailure(
                "browser_unavailable", f"no Chromium at {executable} (docs/browser.md)"
            )
        try:
            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.launch(
                executable_path=executable,
                headless=True,
                args=["--no-sandbox", "--disable-dev-shm-usage", self.marker],
                timeout=max(self.action_timeout, LAUNCH_SECONDS) * 1000,
            )
            state = self.state_path
            self._context = await self._browser.new_context(
                storage_state=str(state) if state.is_file() else None,
                accept_downloads=True,
                viewport=VIEWPORT,
            )
            self._context.set_default_timeout(self.action_timeout * 1000)
            await self._context.route("**/*", self._guard)
            self.page = await self._context.new_page()
            self.page.on("crash", lambda _page: setattr(self, "crashed", True))
            self.page.on("download", self._on_download)
        except BrowserFailure:
            await self.close()
            raise
        except Exception as exc:
            await self.close()
            raise BrowserFailure("browser_failed", f"Chromium did not start: {exc}") from None

    async def _guard(self, route: Any) -> None:
        why = await refusal(route.request.url, self.allow_private)
        if why is None:
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    async def _on_download(self, download: Any) -> None:
        name = Path(download.suggested_filename or "download").name or "download"
        target = self.workdir / "downloads" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        await download.save_as(str(target))
        self.downloads.append(str(target.relative_to(self.workdir)))

    async def run(self, what: str, step: Callable[[], Awaitable[T]]) -> T:
        """One page operation under the action timeout; a hung or crashed browser is killed."""
        if not self.open:
            raise BrowserFailure("browser_crashed", "the browser is not running (it crashed)")
        try:
            return await asyncio.wait_for(step(), self.action_timeout)
        except TimeoutError:
            await self.kill()
            raise BrowserFailure(
                "browser_timeout",
                f"the browser did not finish '{what}' within {self.action_timeout:g} s; "
                "it was closed",
            ) from None
        except BrowserFailure:
            raise
        except Exception as exc:
            if self.crashed or ("closed" in str(exc).lower() and "target" in str(exc).lower()):
                await self.kill()
                raise BrowserFailure(
                    "browser_crashed", f"the browser crashed during '{what}'; it was closed"
                ) from None
            raise

    async def save_profile(self) -> None:
        """Write the profile (cookies, local storage) atomically (0600)."""
        if self._context is None or self.crashed:
            return
        state = await asyncio.wait_for(self._context.storage_state(), self.action_timeout)
        data = json.dumps(state, sort_keys=True)
        await asyncio.to_thread(files.write_atomic, self.state_path, data, 0o600)

    async def kill(self) -> None:
        """End the browser at once: its processes by pid, then Playwright."""
        self.crashed = True
        await asyncio.to_thread(kill_marked, self.marker)
        await self.close()

    async def close(self) -> None:
        """Close the browser (the profile stays)."""
        for closing in (self._browser, self._playwright):
            if closing is None:
                continue
            with contextlib.suppress(Exception):
                stop = closing.close() if closing is self._browser else closing.stop()
                await asyncio.wait_for(stop, 10)
        await asyncio.to_thread(kill_marked, self.marker)
        self._browser = self._playwright = self._context = self.page = None
