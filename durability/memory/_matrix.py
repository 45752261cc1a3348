"""The memories' vectors kept in this process: one float32 matrix per (subdir, model,
dimension), so a search is one matrix-vector product instead of a scan of the table.

Never stale. Each search reads, inside its own transaction, the table's change state
(``tx.memories.matrix_state()``: how many vector-moving changes there were, and the newest
memory's ``seq``) and ranks with the matrix only when the matrix reflects exactly that
state. A read transaction that sees a newer state first brings the matrix up to it: the
memories saved since (``seq`` above the last one seen, by this process or any other) are
appended; after a delete or a moved vector the matrix is loaded again. A transaction that
sees an older state than the matrix (or a write transaction, whose uncommitted changes
must never reach a shared copy) gets ``None`` and ranks in SQL as before.

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

try:
    import numpy as np
except ImportError:  # pragma: no cover - numpy is optional on SQLite
    np = None  # type: ignore[assignment]


class _Matrix:
    """The unit vectors of one (subdir, model, dimension), in ``seq`` order."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.lock = threading.Lock()
        self.state: tuple[int, int] | None = None
        self.clear()

    def clear(self) -> None:
        self.data = np.empty((0, self.dim), dtype=np.float32)
        self.areas = np.empty(0, dtype=np.int32)
        self.ids: list[str] = []
        self.area_codes: dict[str, int] = {}
        self.n = 0

    def extend(self, rows: Iterable[tuple[int, str, str, bytes]]) -> None:
        batch: list[tuple[int, str, str, bytes]] = []
        for row in rows:
            batch.append(row)
            if len(batch) == _BATCH:
                self._append(batch)
                batch = []
        if batch:
            self._append(batch)

    def _append(self, rows: list[tuple[int, str, str, bytes]]) -> None:
        end = self.n + len(rows)
        if end > len(self.data):  # room for twice as many (amortised appends)
            size = max(_MIN_ROWS, 2 * len(self.data), end)
            data = np.empty((size, self.dim), dtype=np.float32)
            data[: self.n] = self.data[: self.n]
            areas = np.empty(size, dtype=np.int32)
            areas[: self.n] = self.areas[: self.n]
            self.data, self.areas = data, areas
        block = np.frombuffer(b"".join(r[3] for r in rows), dtype="<f4").reshape(-1, self.dim)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        self.data[self.n : end] = block / np.where(norms == 0, 1.0, norms)[:, None]
        codes = self.area_codes
        self.areas[self.n : end] = [codes.setdefault(r[2], len(codes)) for r in rows]
        self.ids.extend(r[1] for r in rows)
        self.n = end

    def view(self) -> _View:
        # rows below n never change in place: a reload or a growth makes new arrays
        return _View(self.data[: self.n], self.areas[: self.n], self.ids, dict(self.area_codes))


class _View:
    def __init__(self, data: Any, areas: Any, ids: list[str], codes: dict[str, int]) -> None:
        self.data, self.areas, self.ids, self.codes = data, areas, ids, codes

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
        if np is None:
            return None
        state = tx.memories.matrix_state()
        if state is None:
            return None
        with self._lock:
            matrix = self._matrices.setdefault((subdir, model, dim), _Matrix(dim))
        with matrix.lock:
            if matrix.state == state:
                return matrix.view()
            if not refresh:
                return None
            known, matrix.state = matrix.state, None  # half brought up is never used
            if known is not None and known[0] == state[0] and known[1] < state[1]:
                matrix.extend(tx.memories.matrix_rows(subdir, model, dim, known[1]))
            elif known is None or known[0] < state[0]:
                matrix.clear()
                matrix.extend(tx.memories.matrix_rows(subdir, model, dim, 0))
            else:  # this transaction sees an older state than the matrix holds
                matrix.state = known
                return None
            matrix.state = state
            return matrix.view()


_CACHES: weakref.WeakKeyDictionary[Any, MatrixCache] = weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_of(store: Any) -> MatrixCache:
    """The matrices of ``store`` (they go with it)."""
    with _CACHES_LOCK:
        cache = _CACHES.get(store)
        if cache is None:
            cache = _CACHES[store] = MatrixCache()
        return cache
