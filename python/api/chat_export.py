"""POST /api/chat_export: a chat as chat.json-style JSON text."""

from __future__ import annotations

import json
from typing import Any

from python.api._chat import require_context
from python.api._chat_json import export_chat
from python.server.api import ApiHandler


class ChatExport(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        ctx = await require_context(self.runtime, input, "ctxid", "context")
        content = json.dumps(export_chat(ctx), ensure_ascii=False, default=str)
        return {"message": "Chat exported.", "ctxid": ctx.id, "content": content}
