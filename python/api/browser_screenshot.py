"""GET|POST /api/browser_screenshot: one screenshot of the browser agent, as a JPEG.

Two kinds: the screenshot taken just before an action that may change something outside
(``run_id`` and ``call_id``: the evidence the journal keeps for a held run, readable on any
worker), and a step's screenshot in the chat log (``context_id`` and ``hash``: a file in the
chat's private browser folder, on the worker that ran the step).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.responses import Response

from python.api._chat import context_id_of
from python.api._durable_evidence import call_evidence
from python.helpers.browser_session import screens_dir
from python.server.api import ApiError, ApiHandler, bad_request, get_str

HASH = re.compile(r"^[0-9a-f]{64}$")
HEADERS = {"Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff"}


def _missing() -> ApiError:
    return ApiError("screenshot_not_found", "No such browser screenshot.")


class BrowserScreenshot(ApiHandler):
    accepts_api_key = True
    methods = ("GET", "POST")

    async def process(self, input: dict[str, Any], request) -> Response:
        run_id, call_id = get_str(input, "run_id"), get_str(input, "call_id")
        if run_id and call_id:
            data = await self._evidence(run_id, call_id)
        else:
            data = await self._step(input)
        return Response(data, media_type="image/jpeg", headers=HEADERS)

    async def _evidence(self, run_id: str, call_id: str) -> bytes:
        journal = self.runtime.journal
        events = await journal.aio.list_events(run_id=run_id, limit=100_000, verify=False)
        found = call_evidence(events).get(call_id) or {}
        shot = found.get("screenshot")
        if not isinstance(shot, str) or not HASH.match(shot):
            raise _missing()
        return await journal.aio.get_blob(shot)

    async def _step(self, input: dict[str, Any]) -> bytes:
        ctx_id = context_id_of(input, "context_id", "context", "ctxid")
        digest = get_str(input, "hash")
        if not ctx_id or not HASH.match(digest):
            raise bad_request("give run_id and call_id, or context_id and a sha256 'hash'")
        await self.runtime.chats.chat(ctx_id)  # 404 context_not_found for an unknown chat
        path = screens_dir(ctx_id) / f"{digest}.jpg"
        try:
            return await asyncio.to_thread(path.read_bytes)
        except OSError:
            raise _missing() from None
