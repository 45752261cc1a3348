"""Journal step cost against the disk's floor, measured in the same run on the same disk.

A journaled step is what the loop pays around a no-op call: ``record_intent`` (one commit,
on disk before the effect) then ``commit_result`` with a checkpoint (one more commit). Each
history case runs twice: **immediate** (a call whose result is awaited: a model call, a tool
without safe replay) and **deferred** (a safe-replay call: ``defer_result`` hands the result
and checkpoint over without waiting, and the next step's intent carries them, so a steady
step is one commit; durability/journal/_deferral.py).
The floor is one single-row INSERT per transaction under WAL + synchronous=FULL in a fresh
SQLite file in the same temporary folder, sampled next to every journaled step (alternating
which goes first) so that both see the same disk; each case's ratio is its median step
over the median of the floor samples taken next to it. Goal: a step costs at most 3x the
floor (target 2x: two commits per step and nothing else). A second floor on a pregrown WAL
(bench/_common.py pregrow_wal: its commits overwrite WAL frames instead of growing the file,
as the journal's own commits do once its WAL has wrapped) is sampled right after the first;
``ratio_to_grown_floor`` compares with it.

    .venv/bin/python bench/journal_bench.py [--steps N] [--dir PATH] [--json]

Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

from durability import CheckpointData, Journal
from durability.config import DEFAULT_DEFER_SECONDS

GOAL_RATIO = 3.0
TARGET_RATIO = 2.0
MESSAGE = "m" * 200  # a typical short chat message


def _stats(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    mean = statistics.fmean(ordered)
    return {
        "median_us": statistics.median(ordered) / 1000,
        "p99_us": p99 / 1000,
        "mean_us": mean / 1000,
        "per_s": 1e9 / mean if mean else 0.0,
    }


class Floor:
    """One single-row INSERT per transaction, WAL + synchronous=FULL, in a fresh file.

    Sampled between journal steps (interleaved) so that both see the same disk weather.
    """

    def __init__(self, folder: Path) -> None:
        self.path = folder / "floor.sqlite"
        self.conn = sqlite3.connect(self.path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        self.count = 0
        self.wal: list[int] = []

    def sample(self) -> int:
        """Time one durable single-row commit (ns)."""
        self.count += 1
        before = _wal_size(self.path)
        start = time.perf_counter_ns()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO t (v) VALUES (?)", (f"{self.count}:{MESSAGE}",))
        self.conn.execute("COMMIT")
        elapsed = time.perf_counter_ns() - start
        after = _wal_size(self.path)
        if after > before:  # the WAL restarts after an auto-checkpoint
            self.wal.append(after - before)
        return elapsed

    def close(self) -> None:
        self.conn.close()


def _wal_size(path: Path) -> int:
    try:
        return os.path.getsize(f"{path}-wal")
    except OSError:
        return 0


def _pages(deltas: list[int]) -> float:
    """Median WAL frames (pages) one commit appended."""
    return statistics.median(deltas) / (4096 + 24) if deltas else 0.0


def _stored_bytes(path: Path) -> int:
    """Bytes in use in the database file (pages minus free pages), WAL folded in."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)
    finally:
        conn.close()


def measure_steps(
    folder: Path,
    name: str,
    steps: int,
    history_for: Callable[[int, Journal], list[Any]],
    floor: Floor,
    grown: _common.Floor,
    deferred: bool = False,
    defer_seconds: float = DEFAULT_DEFER_SECONDS,
) -> dict[str, Any]:
    """Journaled steps, each next to one floor commit (alternating which goes first) and
    one commit on the pregrown-WAL floor right after it."""
    path = folder / f"{name}{'-deferred' if deferred else ''}.sqlite"
    journal = Journal.open_sqlite(path, defer_seconds=defer_seconds)
    policy = "safe_replay" if deferred else "never"
    finish = journal.defer_result if deferred else journal.commit_result
    try:
        run = journal.admit(f"bench-{name}", f"in-{name}", "0" * 64, message="bench").run
        warmup = steps // 10
        step_ns, intent_ns, result_ns, floor_ns, grown_ns = [], [], [], [], []
        intent_wal: list[int] = []
        result_wal: list[int] = []
        sizes: dict[int, int] = {}
        for seq in range(steps + warmup):
            if seq in (warmup, warmup + steps // 2):
                sizes[seq] = _stored_bytes(path)
            checkpoint = CheckpointData(
                state={"iteration": seq, "agent": 0},
                histories={"0": history_for(seq, journal)},
                seq=seq,
            )
            floor_first = seq % 2 == 0
            floor_sample = floor.sample() if floor_first else 0
            grown_sample = grown.sample() if floor_first else 0
            wal_before = _wal_size(path)
            start = time.perf_counter_ns()
            call = journal.record_intent(
                run.id,
                agent_no=0,
                seq=seq,
                kind="tool",
                name="noop",
                args={"n": seq},
                policy=policy,
            )
            intent_done = time.perf_counter_ns()
            wal_middle = _wal_size(path)
            result_start = time.perf_counter_ns()
            finish(call.id, {"ok": True}, checkpoint=checkpoint)
            end = time.perf_counter_ns()
            wal_after = _wal_size(path)
            if not floor_first:
                floor_sample = floor.sample()
                grown_sample = grown.sample()
            if seq >= warmup:
                floor_ns.append(floor_sample)
                grown_ns.append(grown_sample)
                intent_ns.append(intent_done - start)
                result_ns.append(end - result_start)
                step_ns.append(intent_ns[-1] + result_ns[-1])
                if wal_middle > wal_before:  # the WAL restarts after an auto-checkpoint
                    intent_wal.append(wal_middle - wal_before)
                if wal_after > wal_middle:
                    result_wal.append(wal_after - wal_middle)
        batches = journal.store.batches  # type: ignore[attr-defined]
        alone = journal.store.deferred_alone  # type: ignore[attr-defined]
    finally:
        journal.close()
    final = _stored_bytes(path)
    half = steps - steps // 2
    first_half = (sizes[warmup + steps // 2] - sizes[warmup]) / (steps // 2)
    second_half = (final - sizes[warmup + steps // 2]) / half
    return {
        "floor_samples_ns": floor_ns,
        "floor": _stats(floor_ns),
        "grown_floor_samples_ns": grown_ns,
        "grown_floor": _stats(grown_ns),
        "step": _stats(step_ns),
        "intent": _stats(intent_ns),
        "result_and_checkpoint": _stats(result_ns),
        "commits_per_step": batches / (steps + warmup + 1),
        "deferred_committed_alone": alone,
        "wal_pages_per_intent_commit": _pages(intent_wal),
        "wal_pages_per_result_commit": _pages(result_wal),
        "bytes_per_step": (final - sizes[warmup]) / steps,
        "bytes_per_step_first_half": first_half,
        "bytes_per_step_second_half": second_half,
    }


def constant_history(_: int, journal: Journal) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{i}:{MESSAGE}"} for i in range(20)]


def growing_history(seq: int, journal: Journal) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": f"{i}:{MESSAGE}"} for i in range(seq + 1)]


_frozen: list[Any] = []


def growing_frozen_history(seq: int, journal: Journal) -> list[Any]:
    """The growing history as the loop hands it over: messages frozen once, then reused."""
    if seq == 0:
        _frozen.clear()
    _frozen.append(journal.freeze({"role": "assistant", "content": f"{seq}:{MESSAGE}"}))
    return list(_frozen)


CASES = {"constant": constant_history, "growing": growing_history, "frozen": growing_frozen_history}
CASE_KEYS = ("constant_history", "growing_history", "growing_frozen_history")


def run_bench(
    folder: Path, steps: int, defer_seconds: float = DEFAULT_DEFER_SECONDS
) -> dict[str, Any]:
    started = time.monotonic()
    floor = Floor(folder)
    grown = _common.Floor(folder, "floor-grown.sqlite", wal="grown")
    try:
        for _ in range(50):  # warm the floor files up
            floor.sample()
            grown.sample()
        floor.wal.clear()
        measured = {}
        for deferred in (False, True):  # immediate, then deferred, each case on a new file
            measured[deferred] = [
                measure_steps(folder, name, steps, history, floor, grown, deferred, defer_seconds)
                for name, history in CASES.items()
            ]
    finally:
        floor.close()
        grown.close()
    constant, growing, frozen = cases = measured[False]
    later = measured[True]
    all_floor = [s for case in cases + later for s in case.pop("floor_samples_ns")]
    all_grown = [s for case in cases + later for s in case.pop("grown_floor_samples_ns")]
    for case in cases + later:
        case["ratio_to_floor"] = case["step"]["median_us"] / case["floor"]["median_us"]
        case["p99_ratio_to_floor"] = case["step"]["p99_us"] / case["floor"]["p99_us"]
        grown_median = case["grown_floor"]["median_us"]
        case["ratio_to_grown_floor"] = case["step"]["median_us"] / grown_median
    worst = max(case["ratio_to_floor"] for case in cases)
    worst_grown = max(case["ratio_to_grown_floor"] for case in cases)
    worst_deferred = max(case["ratio_to_floor"] for case in later)
    return {
        "deferred": dict(zip(CASE_KEYS, later, strict=True)),
        "defer_ms": defer_seconds * 1000,
        "worst_ratio_deferred": worst_deferred,
        "worst_ratio_to_grown_floor_deferred": max(c["ratio_to_grown_floor"] for c in later),
        "meets_target_deferred": worst_deferred <= TARGET_RATIO,
        "bench": "journal_step",
        "steps": steps,
        "folder": str(folder),
        "sqlite_version": sqlite3.sqlite_version,
        "floor": {**_stats(all_floor), "wal_pages_per_commit": _pages(floor.wal)},
        "grown_floor": _stats(all_grown),
        "worst_ratio_to_grown_floor": worst_grown,
        "constant_history": constant,
        "growing_history": growing,
        "growing_frozen_history": frozen,
        "goal_ratio": GOAL_RATIO,
        "target_ratio": TARGET_RATIO,
        "worst_ratio": worst,
        "meets_goal": worst <= GOAL_RATIO,
        "seconds": time.monotonic() - started,
    }


def table(result: dict[str, Any]) -> str:
    floor = result["floor"]
    rows = [
        ("case", "median us", "p99 us", "steps/s", "x floor", "x grown", "bytes/step", "WAL pages")
    ]
    rows.append(
        (
            "floor (1 insert/commit)",
            f"{floor['median_us']:.0f}",
            f"{floor['p99_us']:.0f}",
            f"{floor['per_s']:.0f}",
            "1.00",
            "",
            "-",
            f"{floor['wal_pages_per_commit']:.1f}",
        )
    )
    parts = {
        "intent": "wal_pages_per_intent_commit",
        "result_and_checkpoint": "wal_pages_per_result_commit",
    }
    every = [(key, result[key], "") for key in CASE_KEYS]
    every += [(key, result["deferred"][key], "deferred ") for key in CASE_KEYS]
    for key, case, mode in every:
        rows.append(
            (
                f"{mode}{key.replace('_', ' ')} step",
                f"{case['step']['median_us']:.0f}",
                f"{case['step']['p99_us']:.0f}",
                f"{case['step']['per_s']:.0f}",
                f"{case['ratio_to_floor']:.2f}",
                f"{case['ratio_to_grown_floor']:.2f}",
                f"{case['bytes_per_step']:.0f}",
                "",
            )
        )
        rows.append(
            (
                "  floor next to it",
                f"{case['floor']['median_us']:.0f}",
                f"{case['floor']['p99_us']:.0f}",
                f"{case['floor']['per_s']:.0f}",
                "1.00",
                "",
                "",
                "",
            )
        )
        rows.append(
            (
                "  pregrown-WAL floor next to it",
                f"{case['grown_floor']['median_us']:.0f}",
                f"{case['grown_floor']['p99_us']:.0f}",
                f"{case['grown_floor']['per_s']:.0f}",
                "",
                "1.00",
                "",
                "",
            )
        )
        for part, pages in parts.items():
            rows.append(
                (
                    f"  {part.replace('_', ' ')}",
                    f"{case[part]['median_us']:.0f}",
                    f"{case[part]['p99_us']:.0f}",
                    "",
                    "",
                    "",
                    "",
                    f"{case[pages]:.1f}",
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    verdict = "meets" if result["meets_goal"] else "MISSES"
    lines.append(
        f"worst ratio {result['worst_ratio']:.2f}x floor: {verdict} the goal "
        f"(<= {GOAL_RATIO:g}x; target {TARGET_RATIO:g}x); {result['seconds']:.1f}s"
    )
    lines.append(
        f"worst ratio to the pregrown-WAL floor (x grown): "
        f"{result['worst_ratio_to_grown_floor']:.2f}x"
    )
    lines.append(
        f"deferred (safe-replay result rides on the next intent): worst "
        f"{result['worst_ratio_deferred']:.2f}x floor, "
        f"{result['worst_ratio_to_grown_floor_deferred']:.2f}x grown (target {TARGET_RATIO:g}x)"
    )
    growing = result["growing_history"]
    lines.append(
        f"growing history bytes/step: first half {growing['bytes_per_step_first_half']:.0f},"
        f" second half {growing['bytes_per_step_second_half']:.0f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="measured steps per case")
    parser.add_argument("--dir", type=Path, help="folder on the disk to measure (a temp dir)")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument(
        "--defer-ms",
        type=float,
        default=DEFAULT_DEFER_SECONDS * 1000,
        help="how long a deferred write waits for a write to ride on (the server's default)",
    )
    args = parser.parse_args(argv)
    if args.steps < 20:
        parser.error("--steps must be at least 20")
    folder = Path(tempfile.mkdtemp(prefix="journal-bench-", dir=args.dir))
    try:
        result = run_bench(folder, args.steps, args.defer_ms / 1000)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not args.json:
        print(table(result))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.umask(0o077)
    raise SystemExit(main())
