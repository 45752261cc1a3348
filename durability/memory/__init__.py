"""The agent's memory in the journal's own database (docs/memory.md)."""

from durability.memory._api import (
    AREAS,
    DEFAULT_AREA,
    Memories,
    MemoryWrite,
    StoredEmbeddingCache,
    new_memory_id,
)
from durability.memory._filter import compile_filter
from durability.memory._knowledge import Chunk, Knowledge
from durability.memory._models import EmbeddingModels
from durability.memory._records import Memory
from durability.memory._vectors import decode, encode, relevance
from durability.store._tables.memories import RULES_MODEL

__all__ = [
    "AREAS",
    "DEFAULT_AREA",
    "RULES_MODEL",
    "Chunk",
    "EmbeddingModels",
    "Knowledge",
    "Memories",
    "Memory",
    "MemoryWrite",
    "StoredEmbeddingCache",
    "compile_filter",
    "decode",
    "encode",
    "new_memory_id",
    "relevance",
]
