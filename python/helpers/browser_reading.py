"""The browser's reading actions: navigate (GET), scroll, extract, screenshot, observe.

They change nothing outside the browser, so an interrupted one simply runs again after a
crash: ``browser_read`` is on the safe-replay allowlist (durability/replay.py pins this
file's SHA-256). Keep it that way: every reading action is carried out in this file, none
of them clicks, types or submits, and any change needs a review of that claim and a new pin.

Each action ends with the page's state (``observe``): its URL, title, a compact list of the
interactive elements with the indexes the browser model names them by, and the hash of a
screenshot saved in the chat's private browser folder. That state is the call's journaled
result, so the prompt of the next model call is rebuilt from the journal alone on a resume.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Protocol

from python.helpers import files
from python.helpers.browser_session import BrowserFailure, BrowserSession, refusal
from python.helpers.tool import Response, Tool

READ_ACTIONS = ("navigate", "scroll", "extract", "screenshot", "observe")
MAX_ELEMENTS = 80
EXTRACT_CHARS = 6000
INDEX_ATTR = "data-a0-index"

#: Numbers the visible interactive elements in document order and describes them.
LABEL_JS = """
(attr) => {
  const sel = 'a[href], button, input, select, textarea, [role=button], [role=link], '
    + '[onclick], [contenteditable=true]';
  const out = [];
  let i = 0;
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    const style = window.getComputedStyle(el);
    if (r.width === 0 || r.height === 0 || style.visibility === 'hidden'
        || style.display === 'none' || (el.type || '') === 'hidden') {
      el.removeAttribute(attr);
      continue;
    }
    el.setAttribute(attr, String(i));
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || '')
      .trim().replace(/\\s+/g, ' ').slice(0, 80);
    const item = {index: i, tag: el.tagName.toLowerCase(), text: text};
    for (const key of ['type', 'name', 'placeholder', 'href']) {
      const v = el.getAttribute(key);
      if (v) item[key] = v.slice(0, 120);
    }
    out.push(item);
    i += 1;
  }
  return out;
}
"""


class LiveBrowser(Protocol):
    """What an action needs of the chat's browser (python/helpers/browser_loop.py)."""

    async def live(self) -> BrowserSession: ...
    def screens_dir(self) -> Path: ...


async def label(session: BrowserSession) -> list[dict[str, Any]]:
    """Number the interactive elements (the indexes the model names)."""
    found = await session.run("label", lambda: session.page.evaluate(LABEL_JS, INDEX_ATTR))
    return list(found or [])[:MAX_ELEMENTS]


async def screenshot(session: BrowserSession, folder: Path) -> str:
    """A JPEG of the viewport saved as ``<sha256>.jpg`` in ``folder``; its hash."""
    data = await session.run("screenshot", lambda: session.page.screenshot(type="jpeg", quality=60))
    digest = hashlib.sha256(data).hexdigest()
    target = folder / f"{digest}.jpg"
    if not target.exists():
        files.write_atomic(target, data, 0o600)
    return digest


async def observe(session: BrowserSession, folder: Path) -> dict[str, Any]:
    """The page's state: URL, title, interactive elements, screenshot hash."""
    page = session.page
    elements = await label(session)
    title = await session.run("title", page.title)
    return {
        "url": page.url,
        "title": title,
        "elements": elements,
        "screenshot": await screenshot(session, folder),
    }


async def goto(session: BrowserSession, url: str) -> str | None:
    """Open ``url`` by GET; why it was refused, or None."""
    why = await refusal(url, session.allow_private)
    if why is not None:
        return why
    try:
        await session.run("navigate", lambda: session.page.goto(url, wait_until="load"))
    except BrowserFailure:
        raise
    except Exception as exc:
        return f"the page did not open: {str(exc).splitlines()[0][:300]}"
    return None


async def restore(session: BrowserSession, url: str | None) -> None:
    """Bring a new browser back to the last page the journal shows (a GET of a page that was
    already open): the actions of a resumed run continue where the recorded log left off."""
    if url and url != "about:blank" and session.page.url != url:
        await goto(session, url)


class BrowserRead(Tool):
    """One reading action, journaled as a child call of the browser_agent call."""

    shares_state = True

    browser: LiveBrowser

    async def execute(self, **kwargs: Any) -> Response:
        session = await self.browser.live()
        args, action = self.args, self.method or "observe"
        note, extra = "", {}
        if action == "navigate":
            why = await goto(session, str(args.get("url") or ""))
            note = f"refused: {why}" if why else ""
        elif action == "scroll":
            down = str(args.get("direction") or "down") != "up"
            delta = 600 if down else -600
            await session.run("scroll", lambda: session.page.mouse.wheel(0, delta))
        elif action == "extract":
            text = await session.run("extract", lambda: session.page.inner_text("body"))
            extra["text"] = str(text)[:EXTRACT_CHARS]
        page = await observe(session, self.browser.screens_dir())
        await session.save_profile()
        message = f"{action}: {page['url']} ({page['title']})" + (f"; {note}" if note else "")
        return Response(message, False, {"page": page, "note": note, **extra})
