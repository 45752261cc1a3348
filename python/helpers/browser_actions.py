"""The browser's effect actions: click, type, submit, upload, download.

Each may change something outside (a form sent, an order placed), so ``browser_act`` is not
on the safe-replay allowlist: an interrupted one is held for a person. Before the action
runs, ``evidence`` gives the seam (python/durable/seams.py) the last page's URL and title
and a screenshot; the journal keeps them next to the call and the Recovery panel shows them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from python.helpers.browser_reading import INDEX_ATTR, LiveBrowser, label, observe
from python.helpers.browser_session import BrowserSession
from python.helpers.tool import Response, Tool

EFFECT_ACTIONS = ("click", "type", "submit", "upload", "download")
NAVIGATION_WAIT_MS = 2500

SUBMIT_JS = """
(el) => {
  const form = el.form || el.closest('form');
  if (form && typeof form.requestSubmit === 'function') { form.requestSubmit(); return true; }
  if (form) { form.submit(); return true; }
  el.click();
  return false;
}
"""


def _index(args: dict[str, Any]) -> int | None:
    try:
        return int(args.get("index"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def inside(root: Path, relative: str) -> Path | None:
    """``relative`` inside the work folder ``root``, or None when it leaves it."""
    target = (root / relative).resolve()
    return target if target == root.resolve() or root.resolve() in target.parents else None


async def _settled(session: BrowserSession, act: Any) -> None:
    """Run ``act`` and wait for the navigation it may start (none is fine)."""
    page = session.page
    try:
        async with page.expect_navigation(wait_until="load", timeout=NAVIGATION_WAIT_MS):
            await act()
    except Exception as exc:
        if "Timeout" not in type(exc).__name__ and "timeout" not in str(exc).lower():
            raise


class BrowserAct(Tool):
    """One effect action, journaled as a child call of the browser_agent call."""

    shares_state = True

    browser: LiveBrowser
    workdir: Path

    async def evidence(self) -> tuple[dict[str, Any], bytes | None]:
        """The page as it was just before the action: URL, title and a screenshot."""
        session = await self.browser.live()
        page = session.page
        shot = await session.run("screenshot", lambda: page.screenshot(type="jpeg", quality=60))
        title = await session.run("title", page.title)
        fields = {"kind": "browser", "action": self.method, "url": page.url, "title": title}
        return fields, shot

    async def execute(self, **kwargs: Any) -> Response:
        session = await self.browser.live()
        action, args = self.method or "", self.args
        await label(session)
        index = _index(args)
        element = session.page.locator(f"[{INDEX_ATTR}='{index}']")
        note = ""
        if index is None or await session.run("find", element.count) == 0:
            note = f"no element with index {args.get('index')!r} on this page"
        elif action == "click":
            await session.run("click", lambda: _settled(session, element.click))
        elif action == "type":
            text = str(args.get("text") or "")
            await session.run("type", lambda: element.fill(text))
        elif action == "submit":
            await session.run(
                "submit", lambda: _settled(session, lambda: element.evaluate(SUBMIT_JS))
            )
        elif action == "upload":
            path = inside(self.workdir, str(args.get("path") or ""))
            if path is None or not path.is_file():
                note = "upload needs 'path': a file inside the work folder"
            else:
                await session.run("upload", lambda: element.set_input_files(str(path)))
        elif action == "download":
            before = len(session.downloads)
            await session.run("download", lambda: _settled(session, element.click))
            with contextlib.suppress(Exception):
                await session.page.wait_for_timeout(500)
            saved = session.downloads[before:]
            note = f"saved {', '.join(saved)}" if saved else "no download started"
        page = await observe(session, self.browser.screens_dir())
        await session.save_profile()
        message = f"{action}: {page['url']} ({page['title']})" + (f"; {note}" if note else "")
        return Response(message, False, {"page": page, "note": note})
