"""POST /api/api_message: the external API; send a message (X-API-KEY) and wait for the answer.

Returns {context_id, run_id, input_id, status, response}; a run that ends held has
status needs_attention and response null. A repeated input_id returns the recorded run.
``agent_profile`` (upstream's field) names the profile of a chat this request makes; an
existing chat keeps the profile it was made with. An unknown profile is a 400.
"""

from __future__ import annotations

import uuid
from typing import Any

from agent import UserMessage
from python.api._chat import image_parts, log_user_message, save_base64_files, wait_answer
from python.durable.admission import Admitted, SubmitOptions, outcome
from python.helpers import profiles
from python.server.api import ExternalApiHandler, bad_request, get_number, get_str


class ApiMessage(ExternalApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        text = get_str(input, "message")
        ctx_id = get_str(input, "context_id")
        client_input_id = get_str(input, "input_id")
        lifetime = get_number(input, "lifetime_hours", default=24.0)
        attachments = await save_base64_files(self.runtime, input)
        if not text.strip() and not attachments:
            raise bad_request("'message' is required")
        profile = get_str(input, "agent_profile").strip() or None
        if profile is not None and profiles.get_profile(profile) is None:
            raise bad_request(f"there is no agent profile '{profile}'", field="agent_profile")
        input_id = client_input_id or uuid.uuid4().hex
        message = UserMessage(text, attachments, id=input_id)
        message.images = await image_parts(self.runtime, attachments)
        # A retry whose first answer was lost does not know its chat: the journal does.
        options = SubmitOptions(follow_input=bool(client_input_id), profile=profile)
        ctx, admitted = await self.runtime.admit_message(ctx_id, message, options)
        if ctx is not None:
            self.runtime.set_api_lifetime(ctx.id, lifetime)
            if admitted.kind != Admitted.DUPLICATE:
                log_user_message(ctx, message.message, attachments, input_id, message.images)
        answer = await wait_answer(admitted.task)
        status, response = await outcome(self.runtime.journal, admitted, answer)
        return {
            "context_id": admitted.context_id,
            "run_id": admitted.run_id,
            "input_id": input_id,
            "status": status,
            "response": response,
        }
