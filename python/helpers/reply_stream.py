"""The main model's reply as it streams in (upstream's stream extension points).

Reasoning chunks go through ``reasoning_stream_chunk`` and ``reasoning_stream``; reply
chunks through ``response_stream_chunk`` and ``response_stream`` (with the partly parsed
object). Once the reply holds one complete JSON object the rest is ignored. Every chunk
is an intervention check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from python.helpers.tool_request import first_object_end, partial_object

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent


class ReplyStream:
    """The stream callbacks of one main-model call, and the reply they cut."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.end: int | None = None  # where the first complete object ends, once seen

    async def on_reasoning(self, delta: str, full: str) -> None:
        data = {"chunk": delta, "full": full}
        await self.agent.extensions("reasoning_stream_chunk", stream_data=data)
        if data.get("chunk"):
            await self.agent.extensions("reasoning_stream", text=data["full"])
        await self.agent.handle_intervention()

    async def on_response(self, delta: str, full: str) -> None:
        if self.end is not None:
            return  # a complete object was already seen: ignore the rest
        end = first_object_end(full)
        if end is not None:
            self.end = end
            full = full[:end]
        data = {"chunk": delta, "full": full}
        await self.agent.extensions("response_stream_chunk", stream_data=data)
        if data.get("chunk") or end is not None:
            parsed = partial_object(data["full"]) or {}
            await self.agent.extensions("response_stream", text=data["full"], parsed=parsed)
        await self.agent.handle_intervention(data["full"])

    def reply(self, response: str) -> str:
        """The reply cut after its first complete object (as the stream saw it)."""
        end = self.end if self.end is not None else first_object_end(response)
        return response[:end] if end is not None else response
