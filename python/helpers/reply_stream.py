"""The main model's reply as it streams in (upstream's stream extension points).

Reasoning chunks go through ``reasoning_stream_chunk`` and ``reasoning_stream``; reply
chunks through ``response_stream_chunk`` and ``response_stream`` (with the partly parsed
object). Once the reply holds one complete JSON object the rest is ignored. Every chunk
is an intervention check.

The extensions see the text masked (``§§secret(NAME)`` for every known secret value): a
tail that may be the start of a secret is held back until the next chunk shows whether it
is one, and ``finish`` releases what is still held back once the reply is complete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from python.helpers.tool_request import first_object_end, partial_object

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from python.helpers.models import ModelResult


def reply_heading(agent_name: str, parsed: dict[str, Any], idle: str) -> str:
    """The heading of a reply's log item: its headline, else the tool it uses, else
    ``idle`` (``Generating`` while it streams, ``Reasoning`` when restored)."""
    headline = parsed.get("headline")
    if isinstance(headline, str) and headline.strip():
        return f"{agent_name}: {headline.strip()}"
    tool = parsed.get("tool_name")
    if isinstance(tool, str) and tool:
        return f"{agent_name}: Using {tool}"
    return f"{agent_name}: {idle}"


def _chunk(before: str, now: str) -> str:
    """What ``now`` adds to ``before`` (all of ``now`` when masking rewrote the start)."""
    return now[len(before) :] if now.startswith(before) else now


class ReplyStream:
    """The stream callbacks of one main-model call, and the reply they cut."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.end: int | None = None  # where the first complete object ends, once seen
        self._reasoning = ""  # the masked reasoning shown so far
        self._response = ""  # the masked reply shown so far

    async def on_reasoning(self, delta: str, full: str, *, final: bool = False) -> None:
        masker = self.agent.context.masker
        shown = str(masker.mask(full)) if final else masker.mask_stream(full)
        chunk = _chunk(self._reasoning, shown)
        if not chunk and shown == self._reasoning:
            return  # held back: nothing new to show yet
        self._reasoning = shown
        data = {"chunk": chunk, "full": shown}
        await self.agent.extensions("reasoning_stream_chunk", stream_data=data)
        if data.get("chunk"):
            await self.agent.extensions("reasoning_stream", text=data["full"])
        if not final:  # the reply is complete: no new intervention point
            await self.agent.handle_intervention()

    async def on_response(self, delta: str, full: str, *, final: bool = False) -> None:
        if self.end is not None:
            return  # a complete object was already seen: ignore the rest
        masker = self.agent.context.masker
        masked = str(masker.mask(full))
        end = first_object_end(masked)
        if end is not None:
            self.end = end
            shown = masked[:end]
        else:
            shown = masked if final else masker.hold_back(masked)
        chunk = _chunk(self._response, shown)
        if not chunk and shown == self._response and end is None:
            return  # held back: nothing new to show yet
        self._response = shown
        data = {"chunk": chunk, "full": shown}
        await self.agent.extensions("response_stream_chunk", stream_data=data)
        if data.get("chunk") or end is not None:
            parsed = partial_object(data["full"]) or {}
            await self.agent.extensions("response_stream", text=data["full"], parsed=parsed)
        if not final:
            await self.agent.handle_intervention(data["full"])

    async def finish(self, result: ModelResult) -> None:
        """Show what the stream held back (``result`` is the complete, masked reply)."""
        if result.reasoning and result.reasoning != self._reasoning:
            await self.on_reasoning("", result.reasoning, final=True)
        if result.response and self.end is None and result.response != self._response:
            await self.on_response("", result.response, final=True)

    def reply(self, response: str) -> str:
        """The reply cut after its first complete object (as the stream saw it)."""
        end = self.end if self.end is not None else first_object_end(response)
        return response[:end] if end is not None else response
