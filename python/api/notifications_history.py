"""POST /api/notifications_history: every kept notification (the newest 100), oldest first."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiHandler


class NotificationsHistory(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        manager = self.runtime.notifications
        items = manager.history()
        return {"notifications": items, "guid": manager.guid, "count": len(items)}
