"""Shared pieces of the memory and knowledge endpoints: a memory as upstream's dashboard
shows it, and reading the dashboard's arguments."""

from __future__ import annotations

from typing import Any

from durability.memory import Memory
from python.server.api import bad_request, get_str

MAX_LIMIT = 10_000


def memory_view(memory: Memory, score: float | None = None) -> dict[str, Any]:
    """Upstream's dashboard shape, plus ``subdir``, ``model`` and the search ``score``."""
    meta = dict(memory.metadata)
    view: dict[str, Any] = {
        "id": memory.id,
        "area": memory.area,
        "timestamp": memory.timestamp,
        "content_full": memory.text,
        "knowledge_source": bool(meta.get("knowledge_source", False)),
        "source_file": str(meta.get("source_file") or ""),
        "source_path": str(meta.get("source_path") or ""),
        "file_type": str(meta.get("file_type") or ""),
        "consolidation_action": str(meta.get("consolidation_action") or ""),
        "tags": meta.get("tags") if isinstance(meta.get("tags"), list) else [],
        "metadata": {**meta, "id": memory.id, "area": memory.area, "timestamp": memory.timestamp},
        "subdir": memory.subdir,
        "model": memory.model,
    }
    if score is not None:
        view["score"] = round(score, 4)
    return view


def subdir_of(input: dict[str, Any], default: str) -> str:
    return get_str(input, "memory_subdir") or default


def ids_of(input: dict[str, Any], key: str) -> list[str]:
    value = input.get(key)
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        raise bad_request(f"'{key}' must be a non-empty list of memory ids", field=key)
    return [v.strip() for v in value]
