"""A memory as callers see it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from durability.canonical import Undecodable
from durability.records import fields_of
from durability.store.rows import MemoryRow


@dataclass(frozen=True)
class Memory:
    """One stored memory; ``text`` and ``metadata`` are as stored (masked)."""

    id: str
    subdir: str
    area: str
    text: str
    metadata: dict[str, Any]
    model: str
    created_at: float
    updated_at: float

    @property
    def timestamp(self) -> str:
        """When it was saved, as upstream shows it: local time ``YYYY-MM-DD HH:MM:SS``."""
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.created_at))

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_of(self, "id", "subdir", "area", "text"),
            "metadata": dict(self.metadata),
            **fields_of(self, "model", "timestamp", "created_at", "updated_at"),
        }


def to_memory(row: MemoryRow) -> Memory:
    metadata = row.metadata if isinstance(row.metadata, dict) else {}
    if isinstance(row.metadata, Undecodable):
        metadata = {"damaged": True}
    return Memory(
        row.id, row.subdir, row.area, row.text, metadata, row.model, row.created_at, row.updated_at
    )


def names_of(memory: Memory) -> dict[str, Any]:
    """What a filter sees: the metadata, then ``id``, ``area`` and ``timestamp`` (as upstream,
    the core keys win over metadata of the same name)."""
    return {**memory.metadata, "id": memory.id, "area": memory.area, "timestamp": memory.timestamp}
