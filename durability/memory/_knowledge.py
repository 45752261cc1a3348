"""Knowledge files in memory: each file's chunks replace its old ones in ONE transaction.

The file's row in ``knowledge_files`` (its digest and its chunks' ids) is written in the
same transaction as the chunks, and only when this digest is not recorded yet
(``KnowledgeFileTable.claim``): after a crash a file is either wholly imported with its
row or not at all (the next import does it again), and two importers of the same content
(two workers at start-up) store it once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from durability.errors import InvalidArgument
from durability.memory._api import Memories, MemoryWrite
from durability.store._tables.knowledge import KnowledgeFileRow
from durability.store.base import StoreTx

MAX_PATH_CHARS = 1_000


@dataclass(frozen=True)
class Chunk:
    """One piece of a knowledge file, with its metadata and its vector."""

    text: str
    metadata: Mapping[str, Any]
    vector: Sequence[float]


def _path(path: Any) -> str:
    if not isinstance(path, str) or not path.strip() or len(path) > MAX_PATH_CHARS:
        raise InvalidArgument(
            f"path must be a non-empty text of at most {MAX_PATH_CHARS} characters", field="path"
        )
    return path


class Knowledge:
    """Knowledge files of the memory subdirs of ``memories``' journal."""

    def __init__(self, memories: Memories, *, clock: Callable[[], float] = time.time) -> None:
        self.memories = memories
        self.clock = clock

    def import_file_write(
        self,
        subdir: str,
        path: str,
        area: str,
        digest: str,
        chunks: Sequence[Chunk],
        *,
        model: str,
    ) -> tuple[list[str], MemoryWrite]:
        """(the new chunks' ids, the write). The write returns False (and writes nothing)
        when the file is already recorded with ``digest``; else it deletes the file's old
        chunks, stores the new ones and records the file, and returns True."""
        path = _path(path)
        writes = [
            self.memories.save_write(subdir, area, c.text, c.metadata, c.vector, model=model)
            for c in chunks
        ]
        ids = [memory_id for memory_id, _ in writes]
        row = KnowledgeFileRow(subdir, path, area or "main", digest, tuple(ids), self.clock())

        def op(tx: StoreTx) -> bool:
            old = tx.knowledge_files.get(subdir, path)
            if not tx.knowledge_files.claim(row):
                return False
            if old is not None and old.ids:
                tx.memories.delete(subdir, list(old.ids))
            for _, write in writes:
                write(tx)
            return True

        return ids, op

    def remove_file_write(self, subdir: str, path: str, digest: str) -> MemoryWrite:
        """Deletes a vanished file's chunks and its row (if still recorded with ``digest``);
        how many chunks went."""
        path = _path(path)

        def op(tx: StoreTx) -> int:
            old = tx.knowledge_files.get(subdir, path)
            if (
                old is None
                or old.digest != digest
                or not tx.knowledge_files.drop(subdir, path, digest)
            ):
                return 0
            return tx.memories.delete(subdir, list(old.ids)) if old.ids else 0

        return op

    def import_file(self, *args: Any, **kwargs: Any) -> bool:
        _, op = self.import_file_write(*args, **kwargs)
        return bool(self.memories.journal.store.write(op))

    def remove_file(self, subdir: str, path: str, digest: str) -> int:
        return int(self.memories.journal.store.write(self.remove_file_write(subdir, path, digest)))

    def files(self, subdir: str) -> list[KnowledgeFileRow]:
        """The knowledge files recorded for ``subdir``, by path."""
        self.memories.journal.store.flush()
        return self.memories.journal.store.read(lambda tx: tx.knowledge_files.all(subdir))
