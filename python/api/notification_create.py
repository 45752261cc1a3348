"""POST /api/notification_create: show a notification (a toast, kept in the history).

Upstream's fields: ``message`` (required), ``type`` (info, success, warning, error,
progress), ``priority`` (10 normal, 20 high), ``title``, ``detail`` (HTML, sanitised by the
UI), ``display_time`` (seconds; unusable values become 3, 0 keeps the toast until closed),
``group`` (a toast of the same group is replaced) and ``id`` (update that notification in
place, unread again). Texts are masked like everything the server shows.
"""

from __future__ import annotations

from typing import Any

from python.helpers import notifications
from python.server.api import ApiHandler, get_str


class NotificationCreate(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        message = get_str(input, "message", required=True)
        mask = self.runtime.journal.masker.mask_text
        item = self.runtime.notifications.add(
            mask(message),
            type=notifications.check_type(input.get("type")),
            priority=notifications.check_priority(input.get("priority")),
            title=mask(get_str(input, "title")),
            detail=mask(get_str(input, "detail")),
            display_time=notifications.display_time_of(input.get("display_time")),
            group=get_str(input, "group"),
            id=get_str(input, "id"),
        )
        return {"success": True, "notification_id": item.id, "message": "Notification created."}
