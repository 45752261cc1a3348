"""CPU per journaled step (process time, not wall clock), for a shared or noisy machine.

Runs journaled no-op steps (intent commit, then result + checkpoint commit) on a journal
in ``--dir`` (default /dev/shm, where a commit costs almost no I/O) and reports the
median CPU time of a step over batches of steps:

- ``constant``: every checkpoint carries the same 20-message history;
- ``growing@N``: the history already holds N messages and each step appends one;
- ``frozen@N``: the same, with the caller keeping its messages as ``journal.freeze(...)``
  objects (only the new message is serialised and hashed).

Each case runs twice: immediate (the result awaited, two commits per step) and deferred
(a safe-replay call: ``defer_result`` hands the result and checkpoint over and the next
intent carries them, one commit per step; under ``"deferred"`` in the JSON).

    .venv/bin/python bench/journal_cpu.py [--steps N] [--dir PATH] [--profile CASE]
        [--deferred]

Prints one JSON document. ``--profile constant`` (or ``growing@1000``) prints the top of
a cProfile of that case instead.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durability import CheckpointData, Journal

MESSAGE = "m" * 200
BATCH = 50  # steps per process-time sample (process_time has a coarse tick)


def _constant(_: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"{i}:{MESSAGE}"} for i in range(20)]


def _growing(start: int, freeze: Callable[[Any], Any] = lambda m: m) -> Callable[[int], list[Any]]:
    """Each batch of steps starts again from ``start`` messages (see run_case)."""
    base: list[Any] = []

    def history(seq: int) -> list[Any]:
        if seq % (BATCH + 1) == 0:
            base[:] = [
                freeze({"role": "assistant", "content": f"{i}:{MESSAGE}"}) for i in range(start)
            ]
        base.append(freeze({"role": "assistant", "content": f"{start + seq}:{MESSAGE}"}))
        return list(base)

    return history


def run_case(
    folder: Path, name: str, steps: int, profile: bool = False, deferred: bool = False
) -> dict[str, Any]:
    mode = "-deferred" if deferred else ""
    journal = Journal.open_sqlite(folder / f"{name.replace('@', '_')}{mode}.sqlite")
    finish = journal.defer_result if deferred else journal.commit_result
    if name == "constant":
        history_for = _constant
    elif name.startswith("frozen@"):
        history_for = _growing(int(name.split("@")[1]), journal.freeze)
    else:
        history_for = _growing(int(name.split("@")[1]))
    profiler = cProfile.Profile() if profile else None
    try:
        samples: list[float] = []
        seq = 0
        warmup = 2
        for batch in range(steps // BATCH + warmup):
            # A fresh chat per batch: the history restarts at its size; one untimed step
            # stores it, then BATCH timed steps each append one message.
            run = journal.admit(f"cpu-{batch}", f"in-{batch}", "0" * 64, message="bench").run
            inputs = [history_for(seq + i) for i in range(BATCH + 1)]
            if profiler and batch >= warmup:
                profiler.enable()
            start = 0.0
            for index, history in enumerate(inputs):
                if index == 1:
                    journal.flush()  # the untimed step's deferred result stays untimed
                    start = time.process_time()
                call = journal.record_intent(
                    run.id,
                    agent_no=0,
                    seq=seq,
                    kind="tool",
                    name="noop",
                    args={"n": seq},
                    policy="safe_replay" if deferred else "never",
                )
                finish(
                    call.id,
                    {"ok": True},
                    checkpoint=CheckpointData({"iteration": seq}, {"0": history}, seq),
                )
                seq += 1
            elapsed = time.process_time() - start
            journal.set_run_status(run.id, "completed")
            if profiler:
                profiler.disable()
            if batch >= warmup:
                samples.append(elapsed / BATCH * 1e6)
    finally:
        journal.close()
    if profiler:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(25)
    return {"median_us": statistics.median(samples), "min_us": min(samples)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--profile", help="profile one case (constant, growing@N)")
    parser.add_argument("--deferred", action="store_true", help="profile the deferred step")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="journal-cpu-", dir=args.dir))
    try:
        if args.profile:
            run_case(folder, args.profile, args.steps, profile=True, deferred=args.deferred)
            return 0
        cases = ["constant", "growing@10", "growing@1000", "frozen@10", "frozen@1000"]
        result: dict[str, Any] = {name: run_case(folder, name, args.steps) for name in cases}
        result["deferred"] = {
            name: run_case(folder, name, args.steps, deferred=True) for name in cases
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"bench": "journal_cpu", "steps": args.steps, **result}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
