"""browser_agent: hand a task to a browser agent that drives a headless Chromium.

The call is a child workflow, like call_subordinate: each step of the browser agent (the
browser model's reply and the browser action it chose) is journaled as a child call
(python/helpers/browser_loop.py), so an interrupted task resumes from its recorded action
log instead of starting over. That is why this file is pinned in durability/replay.py:
running an interrupted call again only resumes the child; it repeats no action, because
every action of the browser goes through its own journaled call.
"""

from __future__ import annotations

from typing import Any

from python.helpers.browser_loop import BrowserTask
from python.helpers.browser_session import forget_profile
from python.helpers.tool import Response, Tool, truthy


class BrowserAgent(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        message = str(self.args.get("message", "")).strip()
        if not message:
            return Response("browser_agent needs a 'message': the task for the browser.", False)
        if truthy(self.args.get("reset", False)):
            call_id = self.call_identity[0] if self.call_identity else ""
            forget_profile(self.agent.context.id, call_id)
        answer = await BrowserTask(self, message).run()
        return Response(message=answer, break_loop=False)
