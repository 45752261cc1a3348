"""What the benches share: the disk's floor, percentiles, stored bytes, a plain table.

Imported by the bench scripts as ``_common`` (bench/ is on sys.path when a script runs),
never by the application. Standard library only, so the peers' venv can import it too.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MESSAGE = "m" * 200  # a typical short chat message (~200 bytes)
WAL_FRAME = 4096 + 24  # one WAL frame: a 4 KiB page and its header
# Bytes written once to a new database so its WAL outgrows the auto-checkpoint (1000 pages)
PREGROW_BYTES = 4_500_000


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


def pregrow_wal(path: Path) -> sqlite3.Connection:
    """Give a new SQLite file the WAL of a database that has been written for a while.

    One transaction of ~1,100 pages (then dropped: as many free pages in the file) makes the
    WAL larger than the auto-checkpoint size; once checkpointed, later commits overwrite
    WAL frames from its start instead of growing the file. Measured here, a commit that
    grows the WAL costs up to twice one that overwrites (the file size changes, so the
    sync also writes metadata), so a fresh file's floor would flatter whatever is compared
    with it. Returns the connection that keeps the WAL (the last connection to close a
    database deletes it): close it once the measured system has opened the file.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE bench_pad (b BLOB)")
    conn.execute("INSERT INTO bench_pad VALUES (zeroblob(?))", (PREGROW_BYTES,))
    conn.execute("DROP TABLE bench_pad")
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    return conn


def open_wal_holder(path: Path, wal: str) -> sqlite3.Connection | None:
    """``wal="grown"``: pregrow_wal(path); ``"fresh"``: nothing (the system makes the file)."""
    if wal == "grown":
        return pregrow_wal(path)
    if wal != "fresh":
        raise ValueError(f"wal must be grown or fresh, not {wal!r}")
    return None


WAL_MODES = ("grown", "fresh")


class Floor:
    """One single-row INSERT per transaction, WAL + synchronous=FULL: what one durable
    commit costs on this disk. Sample it next to what it is compared with. By default the
    file's WAL is pregrown (see pregrow_wal), as the journals it is compared with are."""

    def __init__(self, folder: Path, name: str = "floor.sqlite", wal: str = "grown") -> None:
        self.path = folder / name
        holder = open_wal_holder(self.path, wal)
        self.conn = holder or sqlite3.connect(self.path, isolation_level=None)
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


def levels_arg(text: str) -> list[int]:
    """``--levels 1,8,32``: positive integers."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("levels must be integers like 1,8,32") from None
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError("levels must be positive integers")
    return levels


def choices_arg(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    """``--variants a,b``: a comma-separated subset of ``allowed``."""

    def parse(text: str) -> list[str]:
        chosen = [part.strip() for part in text.split(",") if part.strip()]
        if not chosen or set(chosen) - set(allowed):
            raise argparse.ArgumentTypeError(f"choose among {', '.join(allowed)}")
        return chosen

    return parse


def report(
    result: dict[str, Any], started: float, table: Callable[[dict[str, Any]], str], quiet: bool
) -> int:
    """A bench's ending: its run time into ``result``, the table (unless ``quiet``: only the
    JSON document), then the JSON document as the last line; the exit status."""
    result["seconds"] = time.monotonic() - started
    if not quiet:
        print(table(result))
    print(json.dumps(result, sort_keys=True))
    return 0
