"""Each tool call's replay policy: from the engine's table, never from the model's output.

| tool | policy |
| --- | --- |
| pinned in durability/replay.py and its source hashes to the pin | ``safe_replay`` |
| ``call_subordinate``, ``browser_agent``, pinned | ``child`` (resumes; its calls reused) |
| ``browser_read`` (the browser agent's reading actions), pinned | ``safe_replay`` |
| ``browser_act`` (click, type, submit, upload, download) | ``hold`` (with evidence) |
| ``code_execution_tool`` | ``adapter:shell`` (shell receipts prove the outcome) |
| ``input`` (the shipped one) | ``adapter:pty`` (the terminal's delivery receipt) |
| a shipped memory tool (``JOURNAL_ATOMIC_TOOLS``) | ``journal_atomic`` (writes with result) |
| anything else (MCP tools, a changed pinned tool, model calls) | ``hold`` |

A source file is hashed once per process (the shipped tools at start-up, a profile's
tool the first time it is seen, off the event loop), never per call: a tool edited
while the server runs is judged by the code loaded when it was first seen, until a
restart.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

from durability import replay
from durability.adapters.shell import SHELL_POLICY
from durability.recovery import CHILD_POLICY, HOLD_POLICY, SAFE_REPLAY_POLICY
from durability.status import Policy
from python.helpers.tool import Tool

SUBORDINATE_TOOL = "call_subordinate"
#: Child workflows: their own steps are journaled, so an interrupted call resumes them.
CHILD_TOOLS = (SUBORDINATE_TOOL, "browser_agent")
SHELL_TOOL = "code_execution_tool"
INPUT_TOOL = "input"
#: Tools whose only effect is a write to the journal's own database, handed to the session
#: (``Tool.journal_writes``) and committed with the result. Only the shipped file counts: a
#: profile's tool of the same name may do anything, so it is held like any other.
JOURNAL_ATOMIC_TOOLS = (
    "memory_save",
    "memory_load",
    "memory_delete",
    "memory_forget",
    "behaviour_adjustment",
)


def _is_shipped(tool_name: str, source: Path | None) -> bool:
    return source is not None and source == replay.tool_source_path(tool_name).resolve()


def tool_source(tool: Tool) -> Path | None:
    """The file that defines the tool's class."""
    try:
        return Path(inspect.getfile(type(tool))).resolve()
    except (TypeError, OSError):
        return None


class ReplayPolicy:
    """The pins of one process: SHA-256 of each tool source file, computed once."""

    def __init__(self) -> None:
        self._digests: dict[Path, str | None] = {}
        self._lock = threading.Lock()

    def preload(self) -> None:
        """Hash the shipped source of every pinned tool (blocking: call it at start-up)."""
        for name in replay.SAFE_REPLAY:
            self._digest(replay.tool_source_path(name).resolve())

    def _digest(self, source: Path) -> str | None:
        with self._lock:
            if source in self._digests:
                return self._digests[source]
        digest = replay.source_digest(source)
        with self._lock:
            return self._digests.setdefault(source, digest)

    def is_safe(self, tool_name: str, source: Path) -> bool:
        """``durability.replay.is_safe`` with the digest computed once per file."""
        pinned = replay.SAFE_REPLAY.get(tool_name)
        return pinned is not None and self._digest(Path(source).resolve()) == pinned

    def _known(self, source: Path) -> bool:
        with self._lock:
            return source in self._digests

    async def of(self, tool: Tool) -> str:
        """The policy the intent of this tool call records."""
        source = tool_source(tool)
        safe = False
        if source is not None and tool.name in replay.SAFE_REPLAY:
            if not self._known(source):  # a profile's tool seen for the first time
                await asyncio.to_thread(self._digest, source)
            safe = self.is_safe(tool.name, source)
        if tool.name in CHILD_TOOLS:
            return CHILD_POLICY if safe else HOLD_POLICY
        if safe:
            return SAFE_REPLAY_POLICY
        if tool.name == SHELL_TOOL:
            return SHELL_POLICY
        if tool.name == INPUT_TOOL and _is_shipped(INPUT_TOOL, source):
            return Policy.PTY  # the shipped tool only: it hands its text over with a receipt
        if tool.name in JOURNAL_ATOMIC_TOOLS and _is_shipped(tool.name, source):
            return Policy.JOURNAL_ATOMIC
        return HOLD_POLICY

    def shipped_is_safe(self, tool_name: str) -> bool:
        """Recovery's question (durability.recovery.scan): is the shipped tool still pinned?"""
        return self.is_safe(tool_name, replay.tool_source_path(tool_name))
