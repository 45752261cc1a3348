"""What a journaled tool call commits as its result, and what happens when it cannot.

A tool's ``Response`` is committed as ``{message, break_loop, additional}``. When that value
cannot be stored (not JSON data: a set, an object, a NaN, a string that is not valid
Unicode, nesting too deep; or the tool returned no ``Response`` at all) the call is still
closed: it is committed as failed with ``{"error": "result_not_storable", "type", "reason",
"message"}`` and the agent gets that message as a repairable error (a warning it can react
to), live and on replay alike. A replay must never run a tool again because its result
could not be kept, and a run never ends with the call left open.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from durability.errors import NotSerializable
from python.helpers.tool import Response

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability import Journal
    from durability.records import Call

NOT_STORABLE = "result_not_storable"
#: In a ``journal_atomic`` call's result: the agent's next position after the calls the
#: effect made itself (its model calls), so a reused result skips them too.
NEXT_SEQ = "next_seq"
_MAX_WALK = 10_000  # values looked at when naming the offending type


def tool_result(response: Any) -> dict[str, Any]:
    """The value committed for a tool's response (NotSerializable when it is no Response)."""
    if not isinstance(response, Response):
        raise NotSerializable("the tool returned no Response", reason="not_a_response")
    return {
        "message": response.message,
        "break_loop": bool(response.break_loop),
        "additional": response.additional,
    }


def offending_type(value: Any) -> str:
    """The type name of the first part of ``value`` that is not JSON data (best effort)."""
    if not isinstance(value, Response):
        return type(value).__name__
    stack: list[Any] = [value.additional, value.message]
    seen = 0
    while stack and seen < _MAX_WALK:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str | int | float | bool) and key is not None:
                    return type(key).__name__
                stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "float"
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "str"
        elif item is not None and not isinstance(item, bool | int):
            return type(item).__name__
    return "nested value" if seen >= _MAX_WALK or stack else "value"


def storable_text(value: Any, limit: int = 4000) -> str:
    """``str(value)`` cut to ``limit`` characters, valid UTF-8 whatever it held."""
    try:
        text = str(value)
    except Exception:  # a broken __str__ must not keep the call open
        text = f"<{type(value).__name__}>"
    return text[:limit].encode("utf-8", "backslashreplace").decode("utf-8")


async def commit(journal: Journal, agent: Agent, tool: Any, call: Call, response: Any) -> bool:
    """Commit the tool's result; True when it is durable now, False when it rides on the
    run's next write. An unstorable one closes the call as ``result_not_storable`` and
    raises it to the agent as a RepairableException."""
    from python.helpers.errors import RepairableException

    try:  # a safe-replay tool's result rides on the run's next write (the journal decides)
        return not await journal.aio.defer_result(call.id, tool_result(response))
    except NotSerializable as exc:
        type_name = offending_type(response)
        reason = storable_text(exc.fields.get("reason") or exc.message, 200)
    prompt = "fw.tool_result_not_storable.md"
    message = agent.read_prompt(prompt, tool_name=tool.name, type=type_name)
    error = {"error": NOT_STORABLE, "type": type_name, "reason": reason, "message": message}
    await journal.aio.commit_result(call.id, error, failed=True)
    raise RepairableException(message)


async def commit_atomic(
    journal: Journal, agent: Agent, tool: Any, call: Call, response: Any, next_seq: int
) -> None:
    """Commit a ``journal_atomic`` tool's result together with its writes
    (``Tool.journal_writes``; python/durable/atomic.py), and ``next_seq``: the agent's next
    position after the calls the tool made itself (a model call), which a reuse skips. A
    result that cannot be stored closes the call as failed without the writes."""
    writes = list(getattr(tool, "journal_writes", None) or ())
    try:
        result = {**tool_result(response), NEXT_SEQ: next_seq}
        await journal.aio.commit_result_with(call.id, result, writes)
    except NotSerializable:
        await commit(journal, agent, tool, call, response)  # raises, repairable


def skip_nested(seq: dict[int, int], agent_no: int, call: Call) -> None:
    """A reused ``journal_atomic`` result: move the agent's next position past the calls its
    effect made (else the next call would meet one of them at its position)."""
    result = call.result if isinstance(call.result, dict) else {}
    end = result.get(NEXT_SEQ)
    if isinstance(end, int) and not isinstance(end, bool):
        seq[agent_no] = max(seq.get(agent_no, 0), end)
