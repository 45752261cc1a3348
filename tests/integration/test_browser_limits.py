"""The browser's limits with a real Chromium: private addresses refused unless allowed
(Playwright request routing), a hung browser killed at the action timeout, a crashed one
reported, downloads only into the work folder (issue #21)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from python.helpers import browser_session
from python.helpers.browser_reading import goto
from python.helpers.browser_session import BrowserFailure, BrowserSession, refusal
from tests.support.browser_site import browser_site

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

__all__ = ["browser_site"]  # the fixture


async def _eventually(condition, what: str, timeout: float = 30) -> None:
    """Wait on a condition with a deadline without blocking the event loop."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def session(tmp_path: Path):
    opened: list[BrowserSession] = []

    async def make(**settings: object) -> BrowserSession:
        browser = BrowserSession("limits-chat", dict(settings), tmp_path / "work")
        await browser.start()
        opened.append(browser)
        return browser

    yield make
    for browser in opened:
        await browser.close()


async def test_private_addresses_are_refused_unless_allowed(session, browser_site):
    assert await refusal(f"{browser_site.url}/form", False)
    assert await refusal("file:///etc/passwd", True)
    assert await refusal("http://[::1]:9/", False)
    assert await refusal("http://10.1.2.3/", False)
    assert await refusal(f"{browser_site.url}/form", True) is None
    guarded = await session(browser_allow_private_addresses=False)
    why = await goto(guarded, f"{browser_site.url}/form")
    assert why is not None and "browser_allow_private_addresses" in why
    # a page that is allowed (about:blank) pulling a private resource: the route aborts it
    html = f'<img src="{browser_site.url}/whoami?pixel"><a href="{browser_site.url}/form">x</a>'
    await guarded.page.set_content(html)
    with contextlib.suppress(Exception):
        await guarded.page.click("a", timeout=3000)
    await guarded.page.wait_for_timeout(500)
    assert browser_site.paths == []  # nothing reached the loopback site
    allowed = await session(browser_allow_private_addresses=True)
    assert await goto(allowed, f"{browser_site.url}/form") is None
    assert browser_site.paths == ["/form"]


async def test_a_hung_browser_is_killed_at_the_action_timeout(session):
    browser = await session(browser_action_timeout=1)
    marker = browser.marker
    assert browser_session._marked_pids(marker)
    never = "() => new Promise(() => {})"
    with pytest.raises(BrowserFailure) as failed:
        await browser.run("evaluate", lambda: browser.page.evaluate(never))
    assert failed.value.code == "browser_timeout"
    assert "within 1 s" in str(failed.value)
    await _eventually(lambda: not browser_session._marked_pids(marker), "no Chromium left")
    with pytest.raises(BrowserFailure) as again:
        await browser.run("title", browser.page.title if browser.page else asyncio.sleep)
    assert again.value.code == "browser_crashed"


async def test_a_crashed_browser_is_reported(session, browser_site):
    browser = await session(browser_allow_private_addresses=True, browser_action_timeout=10)
    for pid in browser_session._marked_pids(browser.marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with pytest.raises(BrowserFailure) as failed:
        await browser.run("navigate", lambda: browser.page.goto(f"{browser_site.url}/form"))
    assert failed.value.code in ("browser_crashed", "browser_timeout")


async def test_downloads_land_only_in_the_work_folder(session, browser_site, tmp_path):
    browser = await session(browser_allow_private_addresses=True)
    await goto(browser, f"{browser_site.url}/files")
    async with browser.page.expect_download() as info:
        await browser.page.click("a")
    download = await info.value
    await _eventually(lambda: browser.downloads, "the download to be saved")
    assert download.suggested_filename.endswith("report.csv")  # named "../report.csv"
    [saved] = browser.downloads
    assert saved.startswith("downloads/") and "/" not in saved.removeprefix("downloads/")
    assert (tmp_path / "work" / saved).read_bytes() == b"a,b\n1,2\n"
    assert not (tmp_path / "report.csv").exists()
