"""What the benches share: the disk's floor, percentiles, stored bytes, a plain table.

Imported by the bench scripts as ``_common`` (bench/ is on sys.path when a script runs),
never by the application. Standard library only, so the peers' venv can import it too.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MESSAGE = "m" * 200  # a typical short chat message (~200 bytes)
WAL_FRAME = 4096 + 24  # one WAL frame: a 4 KiB page and its header


def use_repo() -> None:
    """Make ``durability`` (and ``tests.support``) importable from a bench script."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The sample at ``fraction`` of a sorted sequence (nearest rank, no interpolation)."""
    if not ordered:
        return 0.0
    return float(ordered[min(len(ordered) - 1, int(len(ordered) * fraction))])


def stats(samples_ns: Sequence[int]) -> dict[str, float]:
    """Median, p99 and mean in microseconds, and the rate the mean allows per second."""
    ordered = sorted(samples_ns)
    if not ordered:
        return {"median_us": 0.0, "p99_us": 0.0, "mean_us": 0.0, "per_s": 0.0, "count": 0}
    mean = statistics.fmean(ordered)
    return {
        "median_us": statistics.median(ordered) / 1000,
        "p99_us": percentile(ordered, 0.99) / 1000,
        "mean_us": mean / 1000,
        "per_s": 1e9 / mean if mean else 0.0,
        "count": len(ordered),
    }


def wal_size(path: Path) -> int:
    try:
        return os.path.getsize(f"{path}-wal")
    except OSError:
        return 0


def stored_bytes(path: Path, checkpoint: bool = True) -> int:
    """Bytes in use in an SQLite file (pages minus free pages), the WAL's newest pages
    included. ``checkpoint`` folds the WAL into the file first (skip it while another
    process may hold the database)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro" if not checkpoint else path, uri=not checkpoint)
    try:
        if checkpoint:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)
    finally:
        conn.close()


class Floor:
    """One single-row INSERT per transaction, WAL + synchronous=FULL, in a fresh file:
    what one durable commit costs on this disk. Sample it next to what it is compared with.
    """

    def __init__(self, folder: Path, name: str = "floor.sqlite") -> None:
        self.path = folder / name
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)")
        self.count = 0
        self.wal: list[int] = []

    def sample(self) -> int:
        """Time one durable single-row commit (ns)."""
        self.count += 1
        before = wal_size(self.path)
        start = time.perf_counter_ns()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO t (v) VALUES (?)", (f"{self.count}:{MESSAGE}",))
        self.conn.execute("COMMIT")
        elapsed = time.perf_counter_ns() - start
        after = wal_size(self.path)
        if after > before:  # the WAL restarts after an auto-checkpoint
            self.wal.append(after - before)
        return elapsed

    def samples(self, n: int) -> list[int]:
        return [self.sample() for _ in range(n)]

    def close(self) -> None:
        self.conn.close()


def wal_pages(deltas: list[int]) -> float:
    """Median WAL frames (pages) one commit appended."""
    return statistics.median(deltas) / WAL_FRAME if deltas else 0.0


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def render(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as aligned text: the first column left, the others right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def environment() -> dict[str, Any]:
    """What the numbers depend on besides the code."""
    return {
        "python": sys.version.split()[0],
        "sqlite_version": sqlite3.sqlite_version,
        "cpus": os.cpu_count(),
        "load_average": load_average(),
    }
