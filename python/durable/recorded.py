"""What the journal recorded, given back to the loop instead of running a call again: a
committed model reply fed through the stream callbacks, a committed failure raised again, a
committed tool result as the Response it stands for; plus the failpoint helper and the call
position a hold names (used by the seams: python/durable/seams.py, atomic.py,
embedding_calls.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durability import failpoints, paths
from durability.canonical import canonical_json
from durability.records import fields_of
from python.helpers import files
from python.helpers.errors import RepairableException
from python.helpers.models import ModelError, ModelNotConfigured, ModelResult
from python.helpers.tool import Response

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability.records import Call
    from python.helpers.chat_session import StreamCallback

NOT_CONFIGURED = ModelNotConfigured.code


class RecordedToolError(Exception):
    """A tool failure replayed from the journal (the tool is not run again)."""

    code = "tool_failed"


def fire(boundary: str, name: str) -> None:
    failpoints.failpoint(boundary, name, paths.state_dir(files.usr_dir()))


def position(call: Call) -> dict[str, Any]:
    """Where a call sits in its run (the detail of a hold names it)."""
    return fields_of(call, "call_id=id", "agent_no", "seq", "kind", "name")


async def replay_reply(
    reply: ModelResult, on_reasoning: StreamCallback | None, on_response: StreamCallback | None
) -> ModelResult:
    """Feed a committed reply once through the stream callbacks (log and history)."""
    if on_reasoning is not None and reply.reasoning:
        await on_reasoning(reply.reasoning, reply.reasoning)
    if on_response is not None and reply.response:
        await on_response(reply.response, reply.response)
    return reply


def recorded_failure(call: Call) -> Exception:
    """A committed model failure, raised again as the first time."""
    result = call.result if isinstance(call.result, dict) else {}
    if result.get("error") == NOT_CONFIGURED:  # never sent: the turn failed on it, so again
        message = str(result.get("message") or "the model is not configured")
        return ModelNotConfigured(message, reason=str(result.get("reason") or ""))
    if result.get("error") == "repairable":  # the loop went on after it: so again
        return RepairableException(str(result.get("message") or "model call failed"))
    # a utility call: the loop copes (compression truncates)
    return ModelError(str(result.get("message") or "model error"), result.get("status"))


def _receipt_text(output: Any) -> str:
    if isinstance(output, dict):
        text = output.get("message", output.get("output"))
        return text if isinstance(text, str) else canonical_json(output)
    return str(output)


def recorded_response(agent: Agent, result: Any) -> Response:
    """The Response a committed tool result stands for (the tool is not run again)."""
    if not isinstance(result, dict):
        return Response(str(result), False)
    if result.get("confirmed_completed"):
        note = str(result.get("note") or "")
        return Response(agent.read_prompt("fw.call_confirmed.md", note=note), False)
    if "receipt" in result:
        return Response(_receipt_text(result["receipt"]), False)
    if isinstance(result.get("message"), str):
        additional = result.get("additional")
        extra = additional if isinstance(additional, dict) else None
        return Response(result["message"], bool(result.get("break_loop")), extra)
    return Response(str(result), False)


def fingerprint_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a model call's fingerprint covers: a message made of parts counts by its
    text parts only (an image is named in its text by its hash, as the browser agent does;
    its bytes may be read from a folder another worker does not have)."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            texts = [str(p.get("text", "")) for p in content if isinstance(p, dict)]
            message = {**message, "content": "\n".join(t for t in texts if t)}
        out.append(message)
    return out
