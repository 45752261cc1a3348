"""Which embedding models made the stored vectors, and moving memories to a new model.

``memory_models`` keeps how to reach every model that made stored vectors (provider, name,
api base, kwargs: never a key), so after a change of model a query can still be embedded
with the old one: search keeps using the old vectors until every memory has its new one.
The move itself (``swap_write``) gives each memory its new vector in place (same id, same
metadata), only when the memory still has the old model and the same text, so a memory
edited or deleted meanwhile is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durability.canonical import canonical_json, load_json
from durability.memory._api import Memories, MemoryWrite
from durability.memory._vectors import encode
from durability.store.base import StoreTx

#: (memory id, the text its new vector was made from, the vector: numbers or stored bytes)
Moved = tuple[str, str, Sequence[float] | bytes]


class EmbeddingModels:
    """The embedding models of ``memories`` (its clock stamps what is recorded here)."""

    def __init__(self, memories: Memories) -> None:
        self.memories = memories

    @property
    def _store(self) -> Any:
        return self.memories.journal.store

    def remember(self, model: str, config: Mapping[str, Any]) -> None:
        """Record how to reach ``model`` (masked like everything the journal stores)."""
        text = canonical_json(self.memories.journal.masker.mask(dict(config)))
        now = self.memories.clock()
        self._store.write(lambda tx: tx.memory_models.put(model, text, now))

    def config_of(self, model: str) -> dict[str, Any] | None:
        found = self._store.read(lambda tx: tx.memory_models.get(model))
        value = load_json(found) if found is not None else None
        return value if isinstance(value, dict) else None

    def stored_models(self) -> dict[str, int]:
        """How many memories each model made (every subdir)."""
        self._store.flush()
        return self._store.read(lambda tx: tx.memory_models.stored_models())

    def texts(self, model: str, after: str = "", limit: int = 500) -> list[tuple[str, str, str]]:
        """(id, subdir, text) of ``model``'s memories, in id order after ``after``."""
        return self._store.read(lambda tx: tx.memory_models.texts(model, after, limit))

    def swap_write(self, old_model: str, new_model: str, vectors: Sequence[Moved]) -> MemoryWrite:
        """Each (id, text it was embedded from, new vector) moves to ``new_model``."""
        rows = []
        for memory_id, text, vector in vectors:  # stored bytes (the cache's) or numbers
            data = vector if isinstance(vector, bytes) else encode(vector)
            rows.append((memory_id, text, len(data) // 4, data))

        def op(tx: StoreTx) -> int:
            changed = tx.memory_models.set_vectors(old_model, new_model, rows)
            sync = getattr(tx.memories, "sync_embeddings", None)  # pgvector's own column
            if sync is not None and changed:
                sync([memory_id for memory_id, _, _, _ in rows])
            return changed

        return op

    def swap(self, old_model: str, new_model: str, vectors: Sequence[Moved]) -> int:
        return int(self._store.write(self.swap_write(old_model, new_model, vectors)))
