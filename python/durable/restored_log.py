"""The chat's log after a restart: the steps journaled after the latest checkpoint.

A checkpoint holds the log items up to the end of a loop iteration. The calls of the
iteration a crash cut short (the model's reply and the tool it chose, the tool's result)
exist only in the journal. ``append_after_checkpoint`` rebuilds their log items from the
journal, the way the loop showed them live (the agent's thoughts and tool choice, the
tool's arguments and output, the answer), each marked ``restored="journal"`` and named by
its ``call_id``; a call whose outcome is unknown (its intent is journaled, its result is
not) is shown with its arguments and marked ``restored="uncertain"``.

A run that is resumed replaces the log with its resume base and replays forward
(python/durable/resume.py); the seams mark the items of reused calls the same way
(python/durable/seams.py), so each call is shown once, whether the run is held or resumed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from durability import integrity
from durability.status import CallKind, CallState
from python.durable import recorded
from python.helpers.reply_stream import reply_heading
from python.helpers.tool_request import first_object_end, partial_object

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext
    from durability import Journal
    from durability.records import Call, Checkpoint

logger = logging.getLogger("a0.durable")

#: call states whose step the chat shows (superseded and not_completed attempts are
#: replaced by a later attempt at the same position)
SHOWN_STATES = (CallState.COMPLETED, CallState.FAILED, CallState.ABANDONED, CallState.OPEN)
RESPONSE_TOOL = "response"


def calls_after(journal: Journal, latest: Checkpoint) -> list[Call]:
    """The calls of the checkpoint's run made after it (per agent: a sequence number at or
    past the checkpoint's counter), in the order they were journaled."""
    state = latest.state.get("current") or {}
    counters = state.get("seq") if isinstance(state, dict) else None
    seq = {int(k): int(v) for k, v in (counters or {}).items()}
    calls = journal.list_calls(latest.run_id, from_seq=seq)  # the journal skips the others
    return [c for c in calls if c.seq >= seq.get(c.agent_no, 0) and c.state in SHOWN_STATES]


def append_after_checkpoint(context: AgentContext, journal: Journal, latest: Checkpoint) -> int:
    """Add the log items of the calls journaled after ``latest``; how many were added.
    Never raises: a step that cannot be shown is left out (the journal keeps it)."""
    try:
        calls = calls_after(journal, latest)
    except Exception as exc:
        logger.warning("chat %s: steps after the checkpoint not shown: %s", context.id, exc)
        return 0
    return append_calls(context, calls)


def append_calls(context: AgentContext, calls: list[Call]) -> int:
    """Add the log items of ``calls`` (``calls_after``, read before); how many were added.
    Never raises: a step that cannot be shown is left out (the journal keeps it)."""
    agents = {a.number: a for a in context.agents()}
    added = 0
    for call in calls:
        agent = agents.get(call.agent_no, context.agent0)
        try:
            for item in call_items(agent, call):
                context.log.log(**item)
                added += 1
        except Exception as exc:  # one step that cannot be shown never hides the others
            logger.warning("chat %s: call %s not shown: %s", context.id, call.id, exc)
    return added


def call_items(agent: Agent, call: Call) -> list[dict[str, Any]]:
    """The log items (``Log.log`` arguments) that show ``call``, masked; a damaged call
    (integrity.call_damages) as a marker only."""
    damages = integrity.call_damages(call)
    if damages:
        items = [damaged_item(agent, call, damages)]
    elif call.kind == CallKind.MODEL:
        items = _model_items(agent, call)
    else:
        items = _tool_items(agent, call)
    for item in items:
        item.setdefault("agentno", call.agent_no)
        item["call_id"] = call.id
        item.setdefault("restored", "uncertain" if _uncertain(call) else "journal")
        item["heading"] = agent.mask(str(item.get("heading") or ""))
        item["content"] = agent.mask(str(item.get("content") or ""))
        item["kvps"] = agent.mask_value(item.get("kvps") or {})
    return items


def damaged_marker(reason: str) -> str:
    """``[damaged record: digest mismatch]``: what the chat shows instead of a damaged value."""
    return f"[damaged record: {reason.replace('_', ' ')}]"


def damaged_item(agent: Agent, call: Call, damages: list[integrity.Damage]) -> dict[str, Any]:
    """One warning in place of a damaged call: which record failed which check, and the ids
    that find it (no stored value: the name too is covered by the damaged fingerprint)."""
    lines = [
        f"{damaged_marker(d.reason)} {d.record} of call {call.id}"
        f" (agent {call.agent_no}, seq {call.seq}, attempt {call.attempt})"
        for d in damages
    ]
    kvps = {"record": ", ".join(d.record for d in damages), "reason": damages[0].reason}
    return {
        "type": "warning",
        "heading": f"{agent.agent_name}: Damaged journal record",
        "content": "\n".join(lines),
        "kvps": kvps,
        "restored": "journal",
    }


def _uncertain(call: Call) -> bool:
    """An open call nobody can vouch for (an open subordinate call is its child's work,
    which has its own calls)."""
    return call.state == CallState.OPEN and call.kind != CallKind.SUBORDINATE


def _model_items(agent: Agent, call: Call) -> list[dict[str, Any]]:
    args = call.args if isinstance(call.args, dict) else {}
    if args.get("kind") == "utility":
        return []  # history summaries are not shown live either
    if call.state == CallState.OPEN:
        heading = f"{agent.agent_name}: Model call, outcome unknown"
        return [{"type": "agent", "heading": heading}]
    result = call.result if isinstance(call.result, dict) else {}
    response = result.get("response")
    if call.state != CallState.COMPLETED or not isinstance(response, str):
        return []  # a failure holds the run (its warning says so) or was asked again
    reasoning = str(result.get("reasoning") or "")
    end = first_object_end(response)
    parsed = partial_object(response[:end] if end is not None else response) or {}
    if not parsed and not reasoning:
        return []  # a reply that is no tool request: the loop warned (misformat)
    kvps = {k: v for k, v in parsed.items() if k != "headline"}
    return [
        {
            "type": "agent",
            "heading": _agent_heading(agent, parsed),
            "content": reasoning,
            "kvps": kvps,
        }
    ]


def _agent_heading(agent: Agent, parsed: dict[str, Any]) -> str:
    """As python/extensions/response_stream/_10_log_from_stream.py names the reply."""
    return reply_heading(agent.agent_name, parsed, "Reasoning")


def _tool_items(agent: Agent, call: Call) -> list[dict[str, Any]]:
    args = call.args if isinstance(call.args, dict) else {}
    raw = args.get("args")
    tool_args: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    method = args.get("method")
    text = _tool_text(agent, call)
    if call.name == RESPONSE_TOOL and call.state == CallState.COMPLETED:
        return [{"type": "response", "heading": f"{agent.agent_name}: Responding", "content": text}]
    full_name = f"{call.name}:{method}" if method else call.name
    heading = f"{agent.agent_name}: Using tool '{full_name}'"
    return [{"type": "tool", "heading": heading, "content": text, "kvps": tool_args}]


def _tool_text(agent: Agent, call: Call) -> str:
    """What the tool item showed when the call ended (nothing while it is open)."""
    result = call.result
    if call.state == CallState.COMPLETED:
        return recorded.recorded_response(agent, result).message.strip()
    if call.state == CallState.FAILED:
        error = result if isinstance(result, dict) else {}
        return str(error.get("message") or "the tool failed")
    if call.state == CallState.ABANDONED:
        return agent.read_prompt("fw.call_abandoned.md", tool_name=call.name)
    return ""
