"""POST /api/message: send a message to a chat and wait for the answer."""

from __future__ import annotations

from typing import Any

from python.api._chat import admit_user_message, wait_answer
from python.durable.admission import outcome
from python.server.api import ApiHandler


class Message(ApiHandler):
    async def process(self, input: dict[str, Any], request) -> dict[str, Any]:
        _chat, message, admitted = await admit_user_message(self.runtime, input)
        answer = await wait_answer(admitted.task)
        if answer is None:
            answer = admitted.response
        status, response = await outcome(self.runtime.journal, admitted, answer)
        return {
            "message": "" if response is None else response,
            "context": admitted.context_id,
            "message_id": message.id,
            "run_id": admitted.run_id,
            "status": status,
        }
