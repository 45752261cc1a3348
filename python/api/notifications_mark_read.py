"""POST /api/notifications_mark_read: mark notifications read, by id or all of them."""

from __future__ import annotations

from typing import Any

from python.server.api import ApiHandler, bad_request, get_bool, get_list


class NotificationsMarkRead(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        mark_all = get_bool(input, "mark_all")
        ids = get_list(input, "notification_ids")
        if not mark_all and not ids:
            raise bad_request("Give 'notification_ids' (a list) or 'mark_all': true.")
        if not all(isinstance(i, str) for i in ids):
            raise bad_request("'notification_ids' must be a list of strings.")
        count = self.runtime.notifications.mark_read(ids, all=mark_all)
        return {"success": True, "marked_count": count, "message": f"{count} marked read."}
