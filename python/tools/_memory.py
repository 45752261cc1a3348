"""What the memory tools share: their memory, checked arguments and clear errors.

A memory tool never writes itself: it builds its writes (``self.journal_writes``) and the
durable session commits them in the same transaction as the tool's result (the
``journal_atomic`` replay class, docs/durability.md). Bad arguments and an unusable memory
(no embedding model, no vector search) are RepairableExceptions: the agent reads the
message and can correct its call.
"""

from __future__ import annotations

from typing import Any

from durability.errors import (
    DurabilityError,
    InvalidArgument,
    MemoryBackendUnavailable,
    MemoryNotFound,
)
from python.helpers.errors import RepairableException
from python.helpers.memory import AgentMemory
from python.helpers.models import ModelError
from python.helpers.tool import Tool


class MemoryTool(Tool):
    """Base of memory_save, memory_load, memory_delete, memory_forget, behaviour_adjustment."""

    def memory(self) -> AgentMemory:
        memory = AgentMemory.of(self.agent)
        if not memory.usable():
            raise RepairableException(
                "Memory is not available: the embedding model is not configured "
                "(settings embed_model_provider, embed_model_api_base and its API key)."
            )
        return memory

    @staticmethod
    def failed(exc: Exception) -> RepairableException:
        if isinstance(exc, DurabilityError):
            return RepairableException(f"Memory refused the call: {exc.message}")
        return RepairableException(f"Memory is not available: {exc}")


def number(value: Any, default: float, name: str) -> float:
    if value is None or value == "":
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RepairableException(f"'{name}' must be a number, got {value!r}") from None


def whole(value: Any, default: int, name: str) -> int:
    if value is None or value == "":
        return default
    try:
        result = int(value)
    except (TypeError, ValueError):
        raise RepairableException(f"'{name}' must be a whole number, got {value!r}") from None
    if result < 1:
        raise RepairableException(f"'{name}' must be at least 1, got {value!r}")
    return result


#: What a memory tool turns into a message for the agent (never a journal failure such as
#: a lost claim: those unwind the run as they should).
MEMORY_ERRORS = (InvalidArgument, MemoryBackendUnavailable, MemoryNotFound, ModelError)
