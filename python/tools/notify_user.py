"""notify_user: show a notification to the user without ending the turn."""

from __future__ import annotations

from typing import Any

from python.helpers.tool import Response, Tool

TYPES = ("info", "success", "warning", "error")


class NotifyUser(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        message = str(self.args.get("message", "")).strip()
        if not message:
            return Response("notify_user needs a non-empty 'message'.", break_loop=False)
        title = str(self.args.get("title", "") or "Notification")
        kind = str(self.args.get("type", "info")).lower()
        if kind not in TYPES:
            kind = "info"
        self.agent.context.log.log(
            type="info" if kind in ("info", "success") else kind,
            heading=self.agent.mask(title),
            content=self.agent.mask(message),
            kvps={"notification": True, "notification_type": kind},
            agentno=self.agent.number,
        )
        return Response("The user was notified.", break_loop=False)
