"""Memory search in the SQLite journal's own file (sqlite-vec) next to FAISS's flat index.

For each size (memories) and dimension: the memories are stored in a fresh journal (in
batches), then ``--queries`` searches (top 10, threshold 0, so every memory is ranked)
are timed through ``durability.memory.Memories.search``, and the same vectors and queries
through FAISS's ``IndexFlatIP`` (upstream's library; exact inner product on unit vectors,
one query at a time), alternately for ``--rounds`` rounds (each figure is the median of the
rounds' figures, and "x FAISS" the median of the rounds' p50 ratios). The first search is
timed apart: it loads the process's copy of the vectors (durability/memory/_matrix.py).
Also: the cost of one save (embedding excluded) next to one journal commit of the same
size class (``put_blob`` of a new 200-byte blob), the two alternated, and the process RSS
after the first search (before FAISS's index is built; with it in ``rss_with_faiss_mb``).
FAISS is a peer extra (bench/requirements-peers.txt): without it the FAISS columns say
"not installed" and the rest still runs.

    python bench/memory_bench.py                 # 1k, 10k, 100k at 384 and 1536
    python bench/memory_bench.py --smoke         # 1k and 10k, few queries
    python bench/memory_bench.py --sizes 1000,10000 --dims 384

Prints a table, then one JSON document (the last line).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

_common.use_repo()

import numpy as np  # noqa: E402

from durability.journal import Journal  # noqa: E402
from durability.memory import Memories, new_memory_id  # noqa: E402
from durability.store.rows import MemoryRow  # noqa: E402

MODEL = "bench/embedder"
BATCH = 2_000
SAVES = 200

try:
    import faiss  # type: ignore[import-not-found]
except ImportError:  # a peer extra: the FAISS column is skipped
    faiss = None


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError):
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _unit(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    data = rng.standard_normal((n, dim), dtype=np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    return data


def _fill(journal: Journal, vectors: np.ndarray) -> float:
    """Store every vector as a memory; seconds taken."""
    start = time.perf_counter()
    dim = vectors.shape[1]
    for first in range(0, len(vectors), BATCH):
        chunk = vectors[first : first + BATCH]
        rows = [
            (
                MemoryRow(
                    id=new_memory_id(),
                    subdir="default",
                    area=("main", "fragments", "solutions")[(first + i) % 3],
                    text=f"memory {first + i}",
                    metadata="{}",
                    model=MODEL,
                    dim=dim,
                    created_at=float(first + i),
                    updated_at=float(first + i),
                ),
                chunk[i].astype("<f4").tobytes(),
            )
            for i in range(len(chunk))
        ]

        def op(tx: Any, rows: list = rows) -> None:
            for row, data in rows:
                tx.memories.insert(row, data)

        journal.store.write(op)
    return time.perf_counter() - start


def _percentiles(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    return {
        "p50_ms": round(_common.percentile(ordered, 0.50) / 1e6, 3),
        "p95_ms": round(_common.percentile(ordered, 0.95) / 1e6, 3),
    }


def _timed(fn: Any, count: int) -> list[int]:
    samples = []
    for i in range(count):
        start = time.perf_counter_ns()
        fn(i)
        samples.append(time.perf_counter_ns() - start)
    return samples


def measure(
    folder: Path, size: int, dim: int, queries: int, seed: int, rounds: int = 1
) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    vectors = _unit(rng, size, dim)
    asked = _unit(rng, queries, dim)
    path = folder / f"memory-{size}-{dim}.sqlite"
    journal = Journal.open_sqlite(path)
    index = None
    try:
        memories = Memories(journal)
        fill_s = _fill(journal, vectors)
        as_lists = [q.tolist() for q in asked]

        def ours(i: int) -> Any:
            return memories.search("default", as_lists[i], model=MODEL, threshold=0.0, limit=10)

        start = time.perf_counter()
        ours(0)  # the first search loads this process's copy of the vectors
        first_ms = (time.perf_counter() - start) * 1000
        rss = _rss_mb()  # the journal, our copy of the vectors and the bench's own array
        if faiss is not None:
            index = faiss.IndexFlatIP(dim)
            index.add(vectors)
            index.search(asked[:1], 10)
        # ours and FAISS's alternate, round by round, so a load that comes and goes on the
        # machine weighs on both alike; each figure is the median over the rounds
        mine: list[dict[str, float]] = []
        theirs: list[dict[str, float]] = []
        for _ in range(rounds):
            mine.append(_percentiles(_timed(ours, queries)))
            if index is not None:
                theirs.append(
                    _percentiles(_timed(lambda i: index.search(asked[i : i + 1], 10), queries))
                )
        top = [m.text for m, _ in ours(0)]
        # one save (embedding excluded: the vector is given) and one journal commit of a
        # new 200-byte blob, alternately, so both see the same moment of the machine
        saves = min(SAVES, max(20, size // 50))
        save_vectors = _unit(rng, saves, dim).tolist()
        save_ns: list[int] = []
        commit_ns: list[int] = []

        def save(i: int) -> None:
            memories.save("default", "main", f"saved {i}", {"n": i}, save_vectors[i], model=MODEL)

        for i in range(saves):
            save_ns += _timed(lambda _, i=i: save(i), 1)
            commit_ns += _timed(lambda _: journal.put_blob(os.urandom(200)), 1)
        rss_all = _rss_mb()
    finally:
        journal.close()
    row: dict[str, Any] = {
        "size": size,
        "dim": dim,
        "queries": queries,
        "rounds": rounds,
        "fill_s": round(fill_s, 2),
        "first_search_ms": round(first_ms, 1),
        "ours": {
            k: round(statistics.median([r[k] for r in mine]), 3) for k in ("p50_ms", "p95_ms")
        },
        "save_ms": round(_common.percentile(sorted(save_ns), 0.5) / 1e6, 3),
        "journal_commit_ms": round(_common.percentile(sorted(commit_ns), 0.5) / 1e6, 3),
        "rss_mb": rss,
        "rss_with_faiss_mb": rss_all,
        "file_mb": round(_common.stored_bytes(path) / 2**20, 1),
        "faiss": None,
    }
    row["save_x_commit"] = round(row["save_ms"] / max(row["journal_commit_ms"], 1e-9), 2)
    if index is not None:
        row["faiss"] = {
            k: round(statistics.median([r[k] for r in theirs]), 3) for k in ("p50_ms", "p95_ms")
        }
        ratios = [m["p50_ms"] / max(t["p50_ms"], 1e-9) for m, t in zip(mine, theirs, strict=True)]
        row["x_faiss_p50_rounds"] = [round(x, 2) for x in ratios]
        row["x_faiss_p50"] = round(statistics.median(ratios), 2)
        _, found = index.search(asked[:1], 10)
        # the same ten, in the same order: both searches are exact
        row["same_top"] = top[0] == f"memory {int(found[0][0])}"
        row["same_top10"] = top == [f"memory {int(i)}" for i in found[0]]
        del index
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = ["memories", "dim", "ours p50", "ours p95", "FAISS p50", "FAISS p95", "x FAISS"]
    head += ["save", "commit", "save x", "first search", "RSS MB"]
    lines = [head]
    for r in rows:
        theirs = r["faiss"] or {}
        lines.append(
            [
                f"{r['size']:,}",
                str(r["dim"]),
                f"{r['ours']['p50_ms']:.2f} ms",
                f"{r['ours']['p95_ms']:.2f} ms",
                f"{theirs['p50_ms']:.3f} ms" if theirs else "not installed",
                f"{theirs['p95_ms']:.3f} ms" if theirs else "-",
                f"{r['x_faiss_p50']}x" if theirs else "-",
                f"{r['save_ms']:.2f} ms",
                f"{r['journal_commit_ms']:.2f} ms",
                f"{r['save_x_commit']}x",
                f"{r['first_search_ms']:.0f} ms",
                f"{r['rss_mb']}",
            ]
        )
    return _common.render(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="1k and 10k, few queries")
    parser.add_argument("--sizes", type=_common.levels_arg, default=None)
    parser.add_argument("--dims", type=_common.levels_arg, default=None)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--dir", type=Path, default=None, help="temporary folder's parent")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument(
        "--faiss-threads",
        type=int,
        default=None,
        help="FAISS's OpenMP threads (its default: one per core)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="alternate ours and FAISS's (3; smoke 1)"
    )
    args = parser.parse_args(argv)
    sizes = args.sizes or ([1_000, 10_000] if args.smoke else [1_000, 10_000, 100_000])
    dims = args.dims or [384, 1536]
    queries = args.queries or (10 if args.smoke else 100)
    rounds = args.rounds or (1 if args.smoke else 3)
    if faiss is not None and args.faiss_threads:
        faiss.omp_set_num_threads(args.faiss_threads)
    folder = Path(tempfile.mkdtemp(prefix="memory-bench-", dir=args.dir))
    try:
        rows = [
            measure(folder, size, dim, queries, args.seed, rounds) for dim in dims for size in sizes
        ]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if faiss is None:
        print("FAISS is not installed (pip install faiss-cpu, bench/requirements-peers.txt):")
        print("its columns are skipped.")
    print(table(rows))
    result = {
        "bench": "memory",
        "backend": "sqlite-vec",
        "faiss": getattr(faiss, "__version__", None) if faiss is not None else None,
        "faiss_threads": faiss.omp_get_max_threads() if faiss is not None else None,
        "results": rows,
        "environment": _common.environment(),
    }
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
