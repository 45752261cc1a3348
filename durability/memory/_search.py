"""Ranking memories inside one store transaction, on either engine.

``search_in(tx, backend, ...)`` is used by reads and by writes alike (``forget`` searches
and deletes in one transaction). On SQLite the process's matrix of the vectors ranks when
it matches what the transaction sees (_matrix.py), else ``sqlite-vec`` ranks in SQL;
``exact`` reads the candidate vectors and ranks them on the worker with numpy (PostgreSQL
without pgvector). Either way the search is exhaustive: every memory of the subdir, model
and areas is compared, and the filter is applied in rank order until ``limit`` memories
are accepted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from durability.errors import MemoryBackendUnavailable
from durability.memory._filter import Accept
from durability.memory._matrix import MatrixCache
from durability.memory._records import Memory, names_of, to_memory
from durability.memory._vectors import min_cosine, relevance
from durability.store.base import StoreTx
from durability.store.rows import MemoryRow

_FETCH = 256  # rows fetched at once after an exact ranking


@dataclass(frozen=True)
class Query:
    subdir: str
    model: str
    vector: bytes
    dim: int
    threshold: float
    limit: int | None
    areas: tuple[str, ...] | None
    accept: Accept | None


def search_in(
    tx: StoreTx,
    backend: str,
    problem: str,
    query: Query,
    matrices: MatrixCache | None = None,
    *,
    refresh: bool = False,
) -> list[tuple[Memory, float]]:
    """The memories matching ``query``, best first, with their relevance. With
    ``matrices``, ranked in this process's copy of the vectors when it matches what ``tx``
    sees (``refresh``: a read transaction may bring it up to date first; _matrix.py)."""
    view = None
    if matrices is not None and backend in ("sqlite-vec", "exact"):
        view = matrices.view(tx, query.subdir, query.model, query.dim, refresh=refresh)
    if view is not None:
        limit = query.limit if query.accept is None else None
        ranked: Iterator[tuple[MemoryRow, float]] = _rows_of(
            tx,
            query.subdir,
            view.ranked(query.vector, query.areas, min_cosine(query.threshold), limit),
        )
    elif backend in ("sqlite-vec", "pgvector"):  # ranked in SQL
        # without a filter the limit is the database's; with one, rows stream in rank order
        limit = query.limit if query.accept is None else None
        ranked = tx.memories.nearest(
            query.subdir,
            query.model,
            query.vector,
            query.dim,
            query.areas,
            min_cosine(query.threshold),
            limit,
        )
    elif backend == "exact":
        ranked = _exact(tx, query)
    else:
        raise MemoryBackendUnavailable(
            f"memory search cannot run: {problem or 'no vector search on this journal'}",
            backend=backend,
            reason=problem,
        )
    found: list[tuple[Memory, float]] = []
    for row, cosine in ranked:
        memory = to_memory(row)
        if query.accept is not None and not query.accept(names_of(memory)):
            continue
        found.append((memory, relevance(cosine)))
        if query.limit is not None and len(found) >= query.limit:
            break
    return found


def _rows_of(
    tx: StoreTx, subdir: str, ranked: Iterator[tuple[str, float]]
) -> Iterator[tuple[MemoryRow, float]]:
    """The rows of ranked ids, fetched a few at a time as the caller reads on."""
    size = 16
    while chunk := list(islice(ranked, size)):
        rows = {row.id: row for row in tx.memories.get(subdir, [i for i, _ in chunk])}
        for memory_id, cosine in chunk:
            row = rows.get(memory_id)
            if row is not None:
                yield row, cosine
        size = min(_FETCH, size * 4)


def _exact(tx: StoreTx, query: Query) -> Iterator[tuple[MemoryRow, float]]:
    try:
        import numpy as np
    except ImportError:
        raise MemoryBackendUnavailable(
            "memory search needs numpy on PostgreSQL (pip install -r requirements-postgres.txt)",
            backend="exact",
            reason="numpy is not installed",
        ) from None
    candidates = tx.memories.vectors(query.subdir, query.model, query.dim, query.areas)
    if not candidates:
        return
    ids = [memory_id for memory_id, _ in candidates]
    matrix = np.frombuffer(b"".join(v for _, v in candidates), dtype="<f4").reshape(
        len(ids), query.dim
    )
    target = np.frombuffer(query.vector, dtype="<f4")
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(target))
    cosines = (matrix @ target) / np.where(norms == 0, 1.0, norms)
    order = np.lexsort((np.array(ids), -cosines))  # best first, then by id (as SQL)
    wanted = [int(i) for i in order if cosines[i] >= min_cosine(query.threshold)]
    for start in range(0, len(wanted), _FETCH):
        chunk = [ids[i] for i in wanted[start : start + _FETCH]]
        rows = {row.id: row for row in tx.memories.get(query.subdir, chunk)}
        for index in wanted[start : start + _FETCH]:
            row = rows.get(ids[index])
            if row is not None:
                yield row, float(cosines[index])


def chosen_areas(areas: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if areas is None or areas == "" or areas == []:
        return None
    return (areas,) if isinstance(areas, str) else tuple(str(a) for a in areas)
