"""POST /api/api_message: the external API; send a message (X-API-KEY) and wait for the answer."""

from __future__ import annotations

import uuid
from typing import Any

from python.api._chat import context_or_new, log_user_message, save_base64_files
from python.helpers.api import ApiHandler, bad_request, get_number, get_str


class ApiMessage(ApiHandler):
    requires_auth = False
    requires_csrf = False
    requires_api_key = True

    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        text = get_str(input, "message")
        ctx_id = get_str(input, "context_id")
        input_id = get_str(input, "input_id") or uuid.uuid4().hex
        lifetime = get_number(input, "lifetime_hours", default=24.0)
        attachments = await save_base64_files(self.runtime, input)
        if not text.strip() and not attachments:
            raise bad_request("'message' is required")
        ctx = context_or_new(self.runtime, ctx_id)
        self.runtime.set_api_lifetime(ctx.id, lifetime)
        log_user_message(ctx, text, attachments, input_id)
        message = self.runtime.make_message(text, attachments, input_id)
        response = await self.runtime.run_message(ctx, message)
        return {"context_id": ctx.id, "input_id": input_id, "response": response}
