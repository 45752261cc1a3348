"""notify_user: show a notification (a toast) to the user without ending the turn.

Upstream's arguments: ``message`` (required), ``title``, ``detail`` (HTML the UI sanitises),
``type`` (info, success, warning, error, progress), ``priority`` (10 normal, 20 high; the
default is high) and ``timeout`` (seconds the toast stays; default 30). The notification
also stays in the chat's log, so a restored chat still shows it.
"""

from __future__ import annotations

from typing import Any

from python.helpers import notifications
from python.helpers.tool import Response, Tool

DEFAULT_PRIORITY = notifications.HIGH
DEFAULT_TIMEOUT = 30.0


class NotifyUser(Tool):
    async def execute(self, **kwargs: Any) -> Response:
        message = str(self.args.get("message", "") or "").strip()
        if not message:
            return Response("notify_user needs a non-empty 'message'.", break_loop=False)
        try:
            kind = notifications.check_type(self.args.get("type"))
            priority = notifications.check_priority(self.args.get("priority"), DEFAULT_PRIORITY)
        except notifications.NotificationError as exc:
            return Response(f"notify_user: {exc.message}", break_loop=False)
        title = self.agent.mask(str(self.args.get("title", "") or ""))
        detail = self.agent.mask(str(self.args.get("detail", "") or ""))
        display_time = notifications.display_time_of(self.args.get("timeout"), DEFAULT_TIMEOUT)
        notifications.manager().add(
            self.agent.mask(message),
            type=kind,
            priority=priority,
            title=title,
            detail=detail,
            display_time=display_time,
        )
        self.agent.context.log.log(
            type=kind if kind in ("warning", "error") else "info",
            heading=title or "Notification",
            content=self.agent.mask(message),
            kvps={"notification": True, "notification_type": kind, "priority": priority},
            agentno=self.agent.number,
        )
        return Response("The user was notified.", break_loop=False)
