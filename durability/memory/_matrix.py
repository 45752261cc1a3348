"""The memories' vectors kept in this process: one float32 matrix per (subdir, model,
dimension), so a search is one matrix-vector product instead of a scan of the table.

Never stale. Each search reads, inside its own transaction, the table's change state
(``tx.memories.matrix_state()``: counts of moved vectors and of deletes, the highest
``seq`` ever deleted, the newest ``seq``) and ranks with the matrix only when the matrix
reflects exactly that state. A read transaction that sees a newer state first brings the
matrix up to it: memories saved since (``seq`` above the last one seen, by this process or
any other) are appended; deleted ones are found by the ``seq`` numbers still in the table
and masked (the matrix is compacted when a quarter of it is dead); after a moved vector
(an update of vector, model, dimension, area, subdir or id), or a delete of a memory at or
above the newest one seen (its ``seq`` may be given again), the matrix is loaded again. A
transaction that sees an older state than the matrix (or a write transaction, whose
uncommitted changes must never reach a shared copy) gets ``None`` and ranks in SQL.

The rows are unit vectors, so the product is the cosine; the order is the SQL search's:
best first, then by id. Without numpy, or on an engine that does not keep the change state
(PostgreSQL), ``view`` answers ``None``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

_FIRST = 64  # candidates ranked first when no limit says how many are needed
_MIN_ROWS = 1024
_BATCH = 512  # rows normalised at once

#: numpy, imported by the first search that may use a matrix (``_numpy``): importing it
#: costs ~0.05-0.1 s, which a server would otherwise spend before it serves (issue #24).
np: Any = None
_NUMPY_MISSING = False


def _numpy() -> Any:
    """numpy, imported on first use; None when it is not installed (optional on SQLite)."""
    global np, _NUMPY_MISSING
    if np is None and not _NUMPY_MISSING:
        try:
            import numpy
        except ImportError:  # pragma: no cover - numpy is optional on SQLite
            _NUMPY_MISSING = True
        else:
            np = numpy
    return np


#: (moved vectors, deletes, highest seq deleted, newest seq): see MemoryTable.matrix_state
State = tuple[int, int, int, int]
Row = tuple[int, str, str, bytes]  # seq, id, area, vector


class _Matrix:
    """The unit vectors of one (subdir, model, dimension), in ``seq`` order."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.lock = threading.Lock()
        self.state: State | None = None
        self.loads = 0  # full loads so far (tests read it)
        self.clear()

    def clear(self) -> None:
        self.data = np.empty((0, self.dim), dtype=np.float32)
        self.areas = np.empty(0, dtype=np.int32)
        self.seqs = np.empty(0, dtype=np.int64)
        self.live = np.empty(0, dtype=bool)
        self.ids: list[str] = []
        self.area_codes: dict[str, int] = {}
        self.n = 0
        self.dead = 0

    def load(self, rows: Iterable[Row]) -> None:
        self.clear()
        self.loads += 1
        self.extend(rows)

    def extend(self, rows: Iterable[Row]) -> None:
        batch: list[Row] = []
        for row in rows:
            batch.append(row)
            if len(batch) == _BATCH:
                self._append(batch)
                batch = []
        if batch:
            self._append(batch)

    def _append(self, rows: list[Row]) -> None:
        end = self.n + len(rows)
        if end > len(self.data):  # room for twice as many (amortised appends)
            size = max(_MIN_ROWS, 2 * len(self.data), end)
            self._resize(size, np.arange(self.n))
        block = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(-1, self.dim)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        self.data[self.n : end] = block / np.where(norms == 0, 1.0, norms)[:, None]
        codes = self.area_codes
        self.areas[self.n : end] = [codes.setdefault(r[2], len(codes)) for r in rows]
        self.seqs[self.n : end] = [r[0] for r in rows]
        self.live[self.n : end] = True
        self.ids.extend(r[1] for r in rows)
        self.n = end

    def _resize(self, size: int, kept: Any) -> None:
        """New arrays of ``size`` rows holding the rows ``kept`` (views keep the old)."""
        count = len(kept)
        data = np.empty((size, self.dim), dtype=np.float32)
        data[:count] = self.data[kept]
        areas = np.empty(size, dtype=np.int32)
        areas[:count] = self.areas[kept]
        seqs = np.empty(size, dtype=np.int64)
        seqs[:count] = self.seqs[kept]
        live = np.zeros(size, dtype=bool)
        live[:count] = self.live[kept]
        self.data, self.areas, self.seqs, self.live = data, areas, seqs, live
        if count != self.n:
            self.ids = [self.ids[i] for i in kept.tolist()]
        self.n = count

    def drop_missing(self, present: Sequence[int]) -> None:
        """Mask the rows whose ``seq`` is no longer in the table (``present``: the seqs of
        the subdir and model); compact when a quarter of the matrix is dead."""
        keep = np.isin(self.seqs[: self.n], np.asarray(present, dtype=np.int64))
        live = self.live.copy()  # a new array: views taken before keep theirs
        live[: self.n] &= keep
        self.live = live
        self.dead = self.n - int(np.count_nonzero(live[: self.n]))
        if self.dead > max(_MIN_ROWS, self.n // 4):
            kept = np.flatnonzero(live[: self.n])
            self._resize(max(_MIN_ROWS, len(kept)), kept)
            self.dead = 0

    def view(self) -> _View:
        # rows below n never change in place: a reload, growth or compaction makes new
        # arrays, and a delete a new mask
        live = self.live[: self.n] if self.dead else None
        return _View(self.data[: self.n], self.areas[: self.n], self.ids, self.area_codes, live)


class _View:
    def __init__(
        self, data: Any, areas: Any, ids: list[str], codes: dict[str, int], live: Any
    ) -> None:
        self.data, self.areas, self.ids, self.live = data, areas, ids, live
        self.codes = dict(codes)

    def ranked(
        self, query: bytes, areas: Sequence[str] | None, min_cosine: float, limit: int | None
    ) -> Iterator[tuple[str, float]]:
        """(id, cosine) at or above ``min_cosine``, best first then by id; lazily, so a
        filter that refuses many ranks only as far as it needs."""
        target = np.frombuffer(query, dtype="<f4").astype(np.float32)
        norm = float(np.sqrt(np.dot(target, target)))
        if norm > 0:
            target = target / norm
        scores = (self.data @ target).astype(np.float64)
        keep = scores >= min_cosine
        if self.live is not None:
            keep &= self.live
        if areas:
            keep &= np.isin(self.areas, [self.codes[a] for a in areas if a in self.codes])
        left = np.flatnonzero(keep)
        step = limit or _FIRST
        while left.size:
            if left.size > step:  # the best ``step`` (and any tied with the last of them)
                values = scores[left]
                kth = np.partition(values, values.size - step)[values.size - step]
                taken, left = left[values >= kth], left[values < kth]
            else:
                taken, left = left, left[:0]
            ids = self.ids
            found = zip((-scores[taken]).tolist(), [ids[i] for i in taken.tolist()], strict=True)
            for negative, memory_id in sorted(found):
                yield memory_id, -negative
            step *= 4


class MatrixCache:
    """Every matrix of one store, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._matrices: dict[tuple[str, str, int], _Matrix] = {}

    def view(self, tx: Any, subdir: str, model: str, dim: int, *, refresh: bool) -> _View | None:
        """The matrix as ``tx`` sees the table, or None (rank in SQL): see the module."""
        if _numpy() is None:
            return None
        state: State | None = tx.memories.matrix_state()
        if state is None:
            return None
        key = (subdir, model, dim)
        with self._lock:
            matrix = self._matrices.get(key)
            if matrix is None:
                matrix = self._matrices[key] = _Matrix(dim)
        with matrix.lock:
            known = matrix.state
            if known == state:
                return matrix.view()
            if not refresh or (known is not None and _older(state, known)):
                return None  # a write, or a transaction that sees less than the matrix
            matrix.state = None  # half brought up is never used
            moves, deletes, top_deleted, newest = state
            if (
                known is None
                or moves != known[0]
                or (deletes != known[1] and top_deleted >= known[3])
            ):
                matrix.load(tx.memories.matrix_rows(subdir, model, dim, 0))
            else:
                if deletes != known[1]:
                    matrix.drop_missing(tx.memories.matrix_seqs(subdir, model))
                if newest != known[3]:
                    matrix.extend(tx.memories.matrix_rows(subdir, model, dim, known[3]))
            matrix.state = state
            return matrix.view()


def _older(state: State, known: State) -> bool:
    """True when ``state`` is earlier than ``known``: the counts and the highest deleted
    ``seq`` only grow, and the newest ``seq`` grows while nothing is deleted."""
    if any(now < then for now, then in zip(state[:3], known[:3], strict=True)):
        return True
    return state[1] == known[1] and state[3] < known[3]


_CACHES: weakref.WeakKeyDictionary[Any, MatrixCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(store: Any) -> MatrixCache:
    """The matrices of ``store`` (they go with it)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = MatrixCache()
        return cache
