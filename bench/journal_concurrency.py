"""Journaled steps of many concurrent runs, the way the server drives the journal.

Each run admits its input, then takes journaled steps: ``record_intent`` (one commit) and
``commit_result`` with a checkpoint (one more), as in bench/journal_bench.py. Two ways
to drive N runs at once:

- ``asyncio``: N tasks on one event loop calling the async facade (``journal.aio``), as
  the server's chats do (on SQLite the facade prepares each write on the loop and hands it
  to the group-commit writer: no thread per call);
- ``threads``: N threads calling the synchronous methods.

Each has a ``-deferred`` twin (``asyncio-deferred``, ``threads-deferred``): the step's call
is a safe-replay one, whose result and checkpoint the journal defers (``defer_result``): they
ride on the run's next intent, so a steady step is one write to wait for instead of two
(durability/journal/_deferral.py). The plain variants are the step of a call whose result
is awaited (a model call, a tool without safe replay).

Closed loop by default: every run starts its next step as soon as the last one ended, so
at N runs the step latency is N over the steps/s (Little's law). ``--rate R`` paces the
runs instead (open loop): together they start R steps per second, each run at its own
fixed interval, and the latency is what a step costs at that load.

Every level gets a new journal in the same temporary folder, and the floor (one single-row
WAL + synchronous=FULL commit in a file of that folder) is sampled right before and after
it. Journals and floor start with a pregrown WAL (bench/_common.py pregrow_wal: commits
overwrite WAL frames, as in a database written for a while); ``--wal fresh`` starts them
from empty files instead. Goal (issue #13): at least 4,000 steps/s at 32 runs, p99 step
latency under 10x the floor.

    .venv/bin/python bench/journal_concurrency.py [--levels 1,8,32,128] [--steps N]
        [--variants asyncio,threads] [--history constant|frozen|growing] [--rate R]
        [--workers N] [--wal grown|fresh] [--dir PATH] [--json] [--smoke]

Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

_common.use_repo()

from durability import CheckpointData, Journal  # noqa: E402

LEVELS = (1, 8, 32, 128)
VARIANTS = ("asyncio", "asyncio-deferred", "threads", "threads-deferred")
DEFERRED_SUFFIX = "-deferred"
HISTORIES = ("constant", "frozen", "growing")
GOAL_RUNS = 32
GOAL_STEPS_PER_S = 4000.0
GOAL_P99_RATIO = 10.0
DIGEST = hashlib.sha256(b"bench").hexdigest()


def history_for(kind: str, journal: Journal) -> Callable[[int], list[Any]]:
    """One run's history per step: ``constant`` (20 plain messages), ``frozen`` (the same
    20, frozen once as the loop does) or ``growing`` (frozen, one message more per step)."""
    base: list[Any] = [{"role": "user", "content": f"{i}:{_common.MESSAGE}"} for i in range(20)]
    if kind == "constant":
        return lambda seq: list(base)
    frozen = [journal.freeze(m) for m in base]
    if kind == "frozen":
        return lambda seq: list(frozen)

    def growing(seq: int) -> list[Any]:
        message = {"role": "assistant", "content": f"{seq}:{_common.MESSAGE}"}
        frozen.append(journal.freeze(message))
        return list(frozen)

    return growing


def checkpoint(seq: int, history: list[Any]) -> CheckpointData:
    return CheckpointData(state={"iteration": seq, "agent": 0}, histories={"0": history}, seq=seq)


def intent_args(seq: int, deferred: bool = False) -> dict[str, Any]:
    return {
        "agent_no": 0,
        "seq": seq,
        "kind": "tool",
        "name": "noop",
        "args": {"n": seq},
        "policy": "safe_replay" if deferred else "never",
    }


class Level(NamedTuple):
    """What one level measured."""

    latencies_ns: list[int]  # per step: record_intent + commit_result
    elapsed_ns: int  # wall time from the release of the runs to the last step's end
    transactions_before: int | None  # the writer's transaction count at the release
    cpu_ns: int  # process CPU time (all threads) over the same window
    switches: int  # context switches of all threads (voluntary or not) over the window


def usage() -> tuple[int, int]:
    """CPU time (ns) and context switches of this process so far, all threads (ended ones
    included)."""
    counts = resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time_ns(), counts.ru_nvcsw + counts.ru_nivcsw


def ok_result(seq: int) -> Any:
    return {"ok": True}


def pace(runs: int, rate: float | None) -> Callable[[int, int], float]:
    """When run i starts step k (seconds after the release; 0: at once): open loop, each
    run every runs/rate seconds, the runs spread evenly over that interval."""
    if not rate:
        return lambda i, k: 0.0
    interval = runs / rate
    return lambda i, k: (k + i / runs) * interval


async def asyncio_level(
    journal: Journal,
    tag: str,
    runs: int,
    steps: int,
    history: str,
    result_for: Callable[[int], Any] = ok_result,
    rate: float | None = None,
    deferred: bool = False,
) -> Level:
    """N tasks on this loop: admit, wait for all, then steps through ``journal.aio``."""
    finish = journal.aio.defer_result if deferred else journal.aio.commit_result
    due = pace(runs, rate)
    released = 0.0
    latencies: list[int] = []
    admitted = 0
    all_admitted = asyncio.Event()
    go = asyncio.Event()

    async def one(i: int) -> None:
        nonlocal admitted
        admission = await journal.aio.admit(
            f"ctx-{tag}-{i}", f"in-{tag}-{i}", DIGEST, message="bench"
        )
        run_id = admission.run.id
        make = history_for(history, journal)
        admitted += 1
        if admitted == runs:
            all_admitted.set()
        await go.wait()
        for seq in range(steps):
            wait = released + due(i, seq) - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            data = checkpoint(seq, make(seq))
            start = time.perf_counter_ns()
            call = await journal.aio.record_intent(run_id, **intent_args(seq, deferred))
            await finish(call.id, result_for(seq), checkpoint=data)
            latencies.append(time.perf_counter_ns() - start)

    tasks = [asyncio.create_task(one(i)) for i in range(runs)]
    await all_admitted.wait()
    batches = writer_transactions(journal)
    (cpu, switches), start = usage(), time.perf_counter_ns()
    released = time.perf_counter()
    go.set()
    await asyncio.gather(*tasks)
    elapsed, (cpu_end, switches_end) = time.perf_counter_ns() - start, usage()
    return Level(latencies, elapsed, batches, cpu_end - cpu, switches_end - switches)


def threads_level(
    journal: Journal,
    tag: str,
    runs: int,
    steps: int,
    history: str,
    result_for: Callable[[int], Any] = ok_result,
    rate: float | None = None,
    deferred: bool = False,
) -> Level:
    """The same with N threads calling the synchronous methods."""
    finish = journal.defer_result if deferred else journal.commit_result
    due = pace(runs, rate)
    began: list[tuple[int | None, tuple[int, int], int]] = []
    released: list[float] = []

    def release() -> None:  # run by one thread once all arrived, before any goes on
        began.append((writer_transactions(journal), usage(), time.perf_counter_ns()))
        released.append(time.perf_counter())

    barrier = threading.Barrier(runs + 1, action=release)
    latencies: list[int] = []  # list.append is atomic under the GIL
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            admission = journal.admit(f"ctx-{tag}-{i}", f"in-{tag}-{i}", DIGEST, message="bench")
            run_id = admission.run.id
            make = history_for(history, journal)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()
            raise
        barrier.wait()
        for seq in range(steps):
            wait = released[0] + due(i, seq) - time.perf_counter()
            if wait > 0:
                time.sleep(wait)  # the pace of the open loop, not a synchronisation
            data = checkpoint(seq, make(seq))
            start = time.perf_counter_ns()
            call = journal.record_intent(run_id, **intent_args(seq, deferred))
            finish(call.id, result_for(seq), checkpoint=data)
            latencies.append(time.perf_counter_ns() - start)

    threads = [threading.Thread(target=one, args=(i,), name=f"run-{i}") for i in range(runs)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait()
    except threading.BrokenBarrierError:
        for thread in threads:
            thread.join()
        raise RuntimeError(f"a run could not start: {errors[:1]}") from None
    ((batches, (cpu, switches), start),) = began  # every run admitted, no step yet
    for thread in threads:
        thread.join()
    elapsed, (cpu_end, switches_end) = time.perf_counter_ns() - start, usage()
    if len(latencies) != runs * steps:
        raise RuntimeError("a run failed; see the thread's traceback above")
    return Level(latencies, elapsed, batches, cpu_end - cpu, switches_end - switches)


def writer_transactions(journal: Journal) -> int | None:
    """Transactions the group-commit writer committed so far (None if not exposed)."""
    value = getattr(journal.store, "batches", None)
    return value if isinstance(value, int) else None


@dataclass
class Options:
    levels: list[int]
    variants: list[str]
    total_steps: int  # per level, shared by its runs
    history: str = "constant"
    floor_samples: int = 100
    workers: int | None = None  # the journal's own pool (None: its default)
    wal: str = "grown"  # the journals' and the floor's WAL: pregrown or fresh
    rate: float | None = None  # open loop: steps/s offered by all runs together


def measure_level(
    folder: Path, variant: str, runs: int, opts: Options, floor: _common.Floor
) -> dict[str, Any]:
    steps_per_run = max(opts.total_steps // runs, 5)
    history, workers = opts.history, opts.workers
    tag = f"{variant}-{runs}"
    path = folder / f"{tag}.sqlite"
    floor_ns = floor.samples(opts.floor_samples // 2)
    holder = _common.open_wal_holder(path, opts.wal)
    journal = Journal.open_sqlite(path)
    if workers:
        journal.async_workers = workers
    if holder is not None:
        holder.close()  # the journal's connections keep the WAL from here on
    deferred = variant.endswith(DEFERRED_SUFFIX)
    level_args = (journal, tag, runs, steps_per_run, history)
    try:
        if variant.startswith("asyncio"):
            level = asyncio_level(*level_args, rate=opts.rate, deferred=deferred)
            latencies, elapsed_ns, before, cpu_ns, switches = asyncio.run(level)
        else:
            level_run = threads_level(*level_args, rate=opts.rate, deferred=deferred)
            latencies, elapsed_ns, before, cpu_ns, switches = level_run
        journal.flush()  # the last steps' deferred results count in this level
        after = writer_transactions(journal)
        alone = getattr(journal.store, "deferred_alone", None)
    finally:
        journal.close()
    floor_ns += floor.samples(opts.floor_samples - opts.floor_samples // 2)
    steps = len(latencies)
    step = _common.stats(latencies)
    floor_stats = _common.stats(floor_ns)
    commits = None
    if before is not None and after is not None:
        commits = after - before
    floor_rate = 1e6 / floor_stats["median_us"] if floor_stats["median_us"] else None
    steps_per_s = steps / (elapsed_ns / 1e9)
    return {
        "variant": variant,
        "runs": runs,
        "steps": steps,
        "seconds": elapsed_ns / 1e9,
        "steps_per_s": steps_per_s,
        "cpu_us_per_step": cpu_ns / 1000 / steps,
        "switches_per_step": switches / steps,
        "step": step,
        "floor": floor_stats,
        "floor_commits_per_s": floor_rate,
        "steps_per_s_over_floor_rate": steps_per_s / floor_rate if floor_rate else None,
        "p50_ratio_to_floor": step["median_us"] / floor_stats["median_us"],
        "p99_ratio_to_floor": step["p99_us"] / floor_stats["median_us"],
        "p99_ratio_to_floor_p99": step["p99_us"] / floor_stats["p99_us"],
        "offered_steps_per_s": opts.rate,
        # Little's law: a closed loop's mean step latency is runs over steps/s
        "closed_loop_latency_us": None if opts.rate else 1e6 * runs / steps_per_s,
        "transactions": commits,
        "writes": 2 * steps,
        "commits_per_batch": (2 * steps) / commits if commits else None,
        "deferred": deferred,
        "deferred_committed_alone": alone,
        "executor_workers": journal.async_workers if variant.startswith("asyncio") else runs,
        "native_async_writes": (
            journal.writes_natively_async() if variant.startswith("asyncio") else None
        ),
    }


def run_bench(folder: Path, opts: Options) -> dict[str, Any]:
    started = time.monotonic()
    floor = _common.Floor(folder, wal=opts.wal)
    results: list[dict[str, Any]] = []
    try:
        floor.samples(30)  # warm the floor file up
        for variant in opts.variants:
            for runs in opts.levels:
                results.append(measure_level(folder, variant, runs, opts, floor))
    finally:
        floor.close()
    at_goal = [r for r in results if r["runs"] == GOAL_RUNS]
    best = max(at_goal, key=lambda r: r["steps_per_s"]) if at_goal else None
    return {
        "bench": "journal_concurrency",
        "folder": str(folder),
        "history": opts.history,
        "wal": opts.wal,
        "rate": opts.rate,
        "total_steps_per_level": opts.total_steps,
        "environment": _common.environment(),
        "results": results,
        "goal": {
            "runs": GOAL_RUNS,
            "steps_per_s": GOAL_STEPS_PER_S,
            "p99_ratio_to_floor": GOAL_P99_RATIO,
        },
        "meets_goal": (
            None
            if best is None
            else best["steps_per_s"] >= GOAL_STEPS_PER_S
            and best["p99_ratio_to_floor"] <= GOAL_P99_RATIO
        ),
        "seconds": time.monotonic() - started,
    }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(result: dict[str, Any]) -> str:
    rows = [
        (
            "variant",
            "runs",
            "steps",
            "steps/s",
            "CPU us/step",
            "switches/step",
            "x floor/s",
            "commits/batch",
            "p50 us",
            "p99 us",
            "p99 x floor",
            "floor us",
        )
    ]
    for r in result["results"]:
        rows.append(
            (
                r["variant"],
                str(r["runs"]),
                str(r["steps"]),
                f"{r['steps_per_s']:.0f}",
                f"{r['cpu_us_per_step']:.0f}",
                f"{r['switches_per_step']:.1f}",
                _fmt(r["steps_per_s_over_floor_rate"], ".2f"),
                _fmt(r["commits_per_batch"], ".1f"),
                f"{r['step']['median_us']:.0f}",
                f"{r['step']['p99_us']:.0f}",
                f"{r['p99_ratio_to_floor']:.1f}",
                f"{r['floor']['median_us']:.0f}",
            )
        )
    lines = [_common.render(rows)]
    goal = result["goal"]
    verdict = {None: "not measured", True: "meets", False: "MISSES"}[result["meets_goal"]]
    env = result["environment"]
    lines.append(
        f"goal at {goal['runs']} runs: >= {goal['steps_per_s']:.0f} steps/s and p99 <= "
        f"{goal['p99_ratio_to_floor']:g}x floor: {verdict}; history {result['history']}; "
        f"load average {env['load_average']}; {result['seconds']:.1f}s"
    )
    pacing = f"open loop at {result['rate']:g} steps/s" if result["rate"] else "closed loop"
    lines.append(
        "x floor/s: steps/s over the floor's commits/s (a step is two writes: 0.5 without "
        f"group commit or deferral); {pacing}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--levels",
        type=_common.levels_arg,
        default=list(LEVELS),
        help="concurrent runs per level (default 1,8,32,128)",
    )
    parser.add_argument(
        "--variants",
        type=_common.choices_arg(VARIANTS),
        default=list(VARIANTS),
        help="asyncio,asyncio-deferred,threads,threads-deferred (default all)",
    )
    parser.add_argument(
        "--steps", type=int, default=4800, help="steps per level, shared by its runs (default 4800)"
    )
    parser.add_argument("--history", choices=HISTORIES, default="constant")
    parser.add_argument(
        "--floor-samples",
        type=int,
        default=100,
        help="floor commits around each level (default 100)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="the journal's own pool (the facade's reads) of this size instead of its default",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="open loop: the runs together start this many steps per second",
    )
    parser.add_argument(
        "--wal",
        choices=_common.WAL_MODES,
        default="grown",
        help="journals and floor on a pregrown WAL (default) or a fresh file",
    )
    parser.add_argument("--dir", type=Path, help="folder on the disk to measure (a temp dir)")
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: levels 1,4, 40 steps")
    args = parser.parse_args(argv)
    if args.smoke:
        args.levels, args.steps, args.floor_samples = [1, 4], 40, 10
    if args.steps < 5 or args.floor_samples < 2:
        parser.error("--steps must be at least 5 and --floor-samples at least 2")
    folder = Path(tempfile.mkdtemp(prefix="journal-concurrency-", dir=args.dir))
    try:
        opts = Options(
            args.levels,
            args.variants,
            args.steps,
            args.history,
            args.floor_samples,
            args.workers,
            args.wal,
            args.rate,
        )
        result = run_bench(folder, opts)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if not args.json:
        print(table(result))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    os.umask(0o077)
    raise SystemExit(main())
