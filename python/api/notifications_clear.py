"""POST /api/notifications_clear: forget every notification (a new guid clears the UIs)."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiHandler


class NotificationsClear(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        self.runtime.notifications.clear()
        return {"success": True, "message": "Notifications cleared."}
