"""The memory API the tools and the dashboard call (docs/memory.md).

Every write is first built as a *transaction function* (``MemoryWrite``: ``tx -> value``)
from arguments checked and masked outside the database, so it can run on its own
(``Memories.save`` ...) or inside the same transaction as the result of the tool call that
made it (``Journal.commit_result_with``: the ``journal_atomic`` replay class). A write
function may be run more than once by the store (after a conflict): it reads and writes
only through its ``tx`` and its ids are chosen before it runs, so a rerun is the same write.
"""

from __future__ import annotations

import asyncio
import secrets
import string
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from durability.canonical import canonical_json
from durability.errors import InvalidArgument, MemoryNotFound
from durability.memory._filter import compile_filter
from durability.memory._matrix import cache_of
from durability.memory._records import Memory, to_memory
from durability.memory._search import Query, chosen_areas, search_in
from durability.memory._vectors import decode, encode
from durability.store.base import StoreTx

if TYPE_CHECKING:  # pragma: no cover
    from durability.journal import Journal

T = TypeVar("T")
P = ParamSpec("P")
MemoryWrite = Callable[[StoreTx], Any]

DEFAULT_AREA = "main"
AREAS = ("main", "fragments", "solutions")
MAX_TEXT_CHARS = 1_000_000
MAX_NAME_CHARS = 200
_ID_ALPHABET = string.ascii_letters + string.digits
_CORE_KEYS = ("id", "area", "timestamp")


def new_memory_id() -> str:
    """Upstream's id shape: 10 random letters and digits (uniform: a byte is kept only
    below 248 = 4 x 62, so each letter is as likely as any other)."""
    chosen: list[str] = []
    while len(chosen) < 10:
        chosen += [_ID_ALPHABET[b % 62] for b in secrets.token_bytes(16) if b < 248]
    return "".join(chosen[:10])


def _name(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME_CHARS:
        raise InvalidArgument(
            f"{field} must be a non-empty text of at most {MAX_NAME_CHARS} characters",
            field=field,
        )
    return value.strip()


def _threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidArgument("threshold must be a number from 0 to 1", field="threshold")
    return float(value)


def _limit(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument("limit must be a whole number of at least 1", field="limit")
    return value


def _stored(
    save_write: Callable[Concatenate[Memories, P], tuple[str, MemoryWrite]],
) -> Callable[Concatenate[Memories, P], str]:
    """``save``: ``save_write`` run alone; the new memory's id once it is stored."""

    def save(memories: Memories, /, *args: P.args, **kwargs: P.kwargs) -> str:
        memory_id, op = save_write(memories, *args, **kwargs)
        memories._write(op)
        return memory_id

    return save


def _counted(
    write: Callable[Concatenate[Memories, P], MemoryWrite],
) -> Callable[Concatenate[Memories, P], int]:
    """``delete`` and ``forget``: their write run alone; how many memories went."""

    def run(memories: Memories, /, *args: P.args, **kwargs: P.kwargs) -> int:
        return int(memories._write(write(memories, *args, **kwargs)))

    return run


class Memories:
    """Memories of every subdir in one journal's database; ``clock`` gives seconds."""

    def __init__(self, journal: Journal, *, clock: Callable[[], float] = time.time) -> None:
        self.journal = journal
        self.clock = clock  # also the embedding models' (durability/memory/_models.py)

    @property
    def search_backend(self) -> str:
        """``sqlite-vec``, ``exact`` (numpy on the worker) or ``unavailable``."""
        return self.journal.store.memory_search_backend

    @property
    def search_problem(self) -> str:
        return self.journal.store.memory_search_problem

    # checks and masking (no database) ----------------------------------------------------
    def _text(self, text: Any) -> str:
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgument("text must be a non-empty text", field="text")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidArgument(f"text is longer than {MAX_TEXT_CHARS} characters", field="text")
        masked: str = self.journal.masker.mask(text)
        return masked

    def _metadata(self, metadata: Mapping[str, Any] | None) -> str:
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
            raise InvalidArgument("metadata must be an object with text keys", field="metadata")
        kept = {k: v for k, v in metadata.items() if k not in _CORE_KEYS}
        return canonical_json(self.journal.masker.mask(kept))  # refuses what cannot be stored

    def _query(
        self,
        subdir: str,
        model: str,
        vector: Sequence[float],
        threshold: float,
        limit: int | None,
        areas: Sequence[str] | str | None,
        filter: str | None,
    ) -> Query:
        data = encode(vector, "query_vector")
        return Query(
            _name("subdir", subdir),
            _name("model", model),
            data,
            len(data) // 4,
            _threshold(threshold),
            None if limit is None else _limit(limit),
            chosen_areas(areas),
            compile_filter(filter),
        )

    def _search_op(
        self, query: Query, *, refresh: bool = False
    ) -> Callable[[StoreTx], list[tuple[Memory, float]]]:
        """``refresh`` only for a read transaction: a write's own uncommitted changes must
        never reach the process's shared copy of the vectors (_matrix.py)."""
        store = self.journal.store
        backend, problem = store.memory_search_backend, store.memory_search_problem
        matrices = cache_of(store)
        return lambda tx: search_in(tx, backend, problem, query, matrices, refresh=refresh)

    # write functions: run alone or in a call's result transaction --------------------------
    def save_write(
        self,
        subdir: str,
        area: str,
        text: str,
        metadata: Mapping[str, Any] | None,
        vector: Sequence[float],
        *,
        model: str,
        memory_id: str | None = None,
    ) -> tuple[str, MemoryWrite]:
        """(the new memory's id, the write that stores it). An empty area is ``main``."""
        from durability.store.rows import MemoryRow

        data = encode(vector)
        now = self.clock()
        row = MemoryRow(
            id=_name("memory_id", memory_id) if memory_id is not None else new_memory_id(),
            subdir=_name("subdir", subdir),
            area=_name("area", area) if area else DEFAULT_AREA,
            text=self._text(text),
            metadata=self._metadata(metadata),
            model=_name("model", model),
            dim=len(data) // 4,
            created_at=now,
            updated_at=now,
        )

        def op(tx: StoreTx) -> str:
            tx.memories.insert(row, data)
            return row.id

        return row.id, op

    def delete_write(self, subdir: str, ids: Sequence[str]) -> MemoryWrite:
        """Deletes the memories with these ids (unknown ones are ignored); how many went."""
        subdir = _name("subdir", subdir)
        if isinstance(ids, str) or not all(isinstance(i, str) for i in ids):
            raise InvalidArgument("ids must be a list of texts", field="ids")
        wanted = [i.strip() for i in ids if i.strip()]
        return lambda tx: tx.memories.delete(subdir, wanted) if wanted else 0

    def forget_write(
        self,
        subdir: str,
        query_vector: Sequence[float],
        *,
        model: str,
        threshold: float = 0.7,
        filter: str | None = None,
        areas: Sequence[str] | str | None = None,
    ) -> MemoryWrite:
        """Deletes every memory matching the search, in the same transaction; how many."""
        query = self._query(subdir, model, query_vector, threshold, None, areas, filter)
        search = self._search_op(query)

        def op(tx: StoreTx) -> int:
            found = [memory.id for memory, _ in search(tx)]
            return tx.memories.delete(query.subdir, found) if found else 0

        return op

    def update_write(
        self,
        subdir: str,
        memory_id: str,
        *,
        text: str | None = None,
        area: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        vector: Sequence[float] | None = None,
        model: str | None = None,
    ) -> MemoryWrite:
        """Changes a memory in place (same id); a new text needs its new vector and model.
        The write raises ``memory_not_found`` when there is no such memory."""
        subdir, memory_id = _name("subdir", subdir), _name("memory_id", memory_id)
        if text is not None and (vector is None or model is None):
            raise InvalidArgument("a new text needs its vector and model", field="vector")
        changes: dict[str, Any] = {"updated_at": self.clock()}
        data = None
        if text is not None:
            changes["text"] = self._text(text)
        if area is not None:
            changes["area"] = _name("area", area)
        if metadata is not None:
            changes["metadata"] = self._metadata(metadata)
        if vector is not None:
            data = encode(vector)
            changes["model"] = _name("model", model or "")
            changes["dim"] = len(data) // 4

        def op(tx: StoreTx) -> Memory:
            if not tx.memories.update(subdir, memory_id, changes, data):
                raise MemoryNotFound("no such memory", memory_id=memory_id, subdir=subdir)
            return to_memory(tx.memories.get(subdir, [memory_id])[0])

        return op

    # running them alone --------------------------------------------------------------------
    def _write(self, op: Callable[[StoreTx], T]) -> T:
        return self.journal.store.write(op)

    def _read(self, op: Callable[[StoreTx], T]) -> T:
        self.journal.store.flush()
        return self.journal.store.read(op)

    save = _stored(save_write)

    def search(
        self,
        subdir: str,
        query_vector: Sequence[float],
        *,
        model: str,
        threshold: float = 0.7,
        limit: int = 10,
        areas: Sequence[str] | str | None = None,
        filter: str | None = None,
    ) -> list[tuple[Memory, float]]:
        """At most ``limit`` memories at or above ``threshold`` (relevance, 0..1), best
        first, of the areas named (all when None) and accepted by ``filter``."""
        query = self._query(subdir, model, query_vector, threshold, limit, areas, filter)
        return self._read(self._search_op(query, refresh=True))

    delete = _counted(delete_write)

    forget = _counted(forget_write)

    def update(self, subdir: str, memory_id: str, **changes: Any) -> Memory:
        memory: Memory = self._write(self.update_write(subdir, memory_id, **changes))
        return memory

    def get(self, subdir: str, memory_id: str) -> Memory:
        subdir, memory_id = _name("subdir", subdir), _name("memory_id", memory_id)
        rows = self._read(lambda tx: tx.memories.get(subdir, [memory_id]))
        if not rows:
            raise MemoryNotFound("no such memory", memory_id=memory_id, subdir=subdir)
        return to_memory(rows[0])

    def list_memories(
        self,
        subdir: str,
        *,
        areas: Sequence[str] | str | None = None,
        limit: int = 100,
        offset: int = 0,
        filter: str | None = None,
    ) -> list[Memory]:
        """Newest first (the dashboard without a search text)."""
        from durability.memory._records import names_of

        subdir, limit = _name("subdir", subdir), _limit(limit)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgument("offset must be a whole number of at least 0", field="offset")
        accept, wanted = compile_filter(filter), chosen_areas(areas)
        if accept is None:
            rows = self._read(lambda tx: tx.memories.newest(subdir, wanted, limit, offset))
            return [to_memory(r) for r in rows]
        rows = self._read(lambda tx: tx.memories.newest(subdir, wanted, 2**31, 0))
        kept = [m for m in map(to_memory, rows) if accept(names_of(m))]
        return kept[offset : offset + limit]

    def counts(self, subdir: str) -> dict[str, int]:
        """How many memories each area of ``subdir`` holds."""
        subdir = _name("subdir", subdir)
        return self._read(lambda tx: tx.memories.count(subdir))

    def subdirs(self) -> list[str]:
        """The memory subdirs with memories, and ``default`` always."""
        found = self._read(lambda tx: tx.memories.subdirs())
        return sorted({"default", *found})

    # the same from an event loop ---------------------------------------------------------
    async def run_async(self, method: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``await memories.run_async(memories.search, ...)``: any method above, in the
        journal's pool (a database read or write never blocks the loop)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.journal.executor(), lambda: method(*args, **kwargs))


class StoredEmbeddingCache:
    """The embedding cache in the journal's database (python/helpers/embeddings.py's
    ``EmbeddingCache``): vectors by (model id, SHA-256 of the text)."""

    def __init__(self, journal: Journal, *, clock: Callable[[], float] = time.time) -> None:
        self.journal = journal
        self.clock = clock

    def get_many_sync(self, model: str, digests: Sequence[str]) -> dict[str, list[float]]:
        wanted = list(digests)
        found = self.journal.store.read(lambda tx: tx.embedding_cache.get(model, wanted))
        return {d: decode(data) for d, (_, data) in found.items()}

    def put_many_sync(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None:
        rows = {}
        for digest, vector in vectors.items():
            data = encode(vector)
            rows[digest] = (len(data) // 4, data)
        now = self.clock()
        if rows:
            self.journal.store.write(lambda tx: tx.embedding_cache.put(model, rows, now))

    async def get_many(self, model: str, digests: Sequence[str]) -> dict[str, list[float]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.journal.executor(), self.get_many_sync, model, list(digests)
        )

    async def put_many(self, model: str, vectors: Mapping[str, Sequence[float]]) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.journal.executor(), self.put_many_sync, model, vectors)

    def forget_model(self, model: str) -> int:
        return int(self.journal.store.write(lambda tx: tx.embedding_cache.drop_model(model)))
