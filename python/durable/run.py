"""The in-memory state of the run a chat works on, and the signal that holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: A checkpoint projection: (small state dict, histories by key).
Projection = tuple[dict[str, Any], dict[str, list[Any]]]


class DurableHold(BaseException):
    """The run was held for a person: unwind the whole chain (not an agent error, so no
    ``except Exception`` in a tool or an extension swallows it)."""

    def __init__(self, reason: str, detail: Any = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class ClaimLost(BaseException):
    """A shared worker lost its claim on the run (taken over, lease run out, a write
    refused with FencingLost): unwind the chain without writing anything more for the
    run; another worker continues it (python/durable/shared.py)."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.reason = reason


@dataclass
class DurableRun:
    """What the session knows about the journaled run its chat is working on."""

    run_id: str
    input_id: str
    start_agent: int = 0
    seq: dict[int, int] = field(default_factory=dict)  # next sequence number per agent
    known_calls: set[str] = field(default_factory=set)  # call ids journaled before a resume
    known_positions: set[tuple[int, int]] = field(default_factory=set)  # (agent, seq) of those
    permits: dict[str, str] = field(default_factory=dict)  # call id -> replay | run
    resume_base: Projection | None = None  # the state a resumed run continues from
    iteration_calls: dict[int, list[str]] = field(default_factory=dict)  # names, per agent

    def note_call(self, agent_no: int, name: str) -> None:
        self.iteration_calls.setdefault(agent_no, []).append(name)

    def fresh_position(self, agent_no: int) -> bool:
        """The agent's next call has no journaled record (not a resumed position)."""
        return (agent_no, self.seq.get(agent_no, 0)) not in self.known_positions

    def take_seq(self, agent_no: int) -> int:
        seq = self.seq.get(agent_no, 0)
        self.seq[agent_no] = seq + 1
        return seq
