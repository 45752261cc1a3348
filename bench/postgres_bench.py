"""The journal on PostgreSQL: a step against its floor, steps/s under concurrency, claims/s.

- **step vs floor**: a journaled step (``record_intent``, then ``commit_result`` with a
  20-message checkpoint) by a shared worker (fenced by its claim) and by an unfenced
  journal, each next to one *floor* sample: a single-row INSERT in its own transaction on
  the same server, same run (alternating which goes first).
- **steps/s**: 1, 8 and 32 runs stepping at once in one worker process (one thread per
  run, one connection pool), for a fixed time each; then 8 and 32 again with the group
  commit of fenced writes on (durability/store/postgres_batch.py; off by default).
- **claims/s**: 1, 2 and 4 worker processes (each holding its liveness lock, as a server
  does) sweeping (``limit`` 2) a backlog of unclaimed runs until a sweep finds none; also
  checks that no run was claimed twice, and reports each worker's share. With
  ``--orphaned``, the same again with a backlog of runs claimed by a worker that is gone
  (its liveness lock free, as after a SIGKILL): a takeover, not a first claim.

The server is ``--dsn`` (or ``A0_BENCH_POSTGRES_DSN``), else a private cluster with
PostgreSQL's default durability (fsync on) started for the run. Each run works in a schema
of its own, dropped at the end.

    .venv/bin/python bench/postgres_bench.py [--steps N] [--seconds S] [--runs N]
        [--orphaned] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durability import CheckpointData, Journal

MESSAGE = "m" * 200
HISTORY = [{"role": "user", "content": f"{i}:{MESSAGE}"} for i in range(20)]


def _stats(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    mean = statistics.fmean(ordered)
    return {
        "median_us": statistics.median(ordered) / 1000,
        "p99_us": p99 / 1000,
        "per_s": 1e9 / mean if mean else 0.0,
    }


def _step(journal: Journal, run_id: str, seq: int) -> None:
    call = journal.record_intent(
        run_id, agent_no=0, seq=seq, kind="tool", name="noop", args={"n": seq}, policy="never"
    )
    checkpoint = CheckpointData(state={"iteration": seq}, histories={"0": HISTORY}, seq=seq)
    journal.commit_result(call.id, {"ok": True}, checkpoint=checkpoint)


class Floor:
    """One single-row INSERT per transaction on the same server (its own connection)."""

    def __init__(self, dsn: str, namespace: str) -> None:
        import psycopg
        from psycopg import sql

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(namespace)))
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_floor (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)"
        )
        self.count = 0

    def sample(self) -> int:
        self.count += 1
        start = time.perf_counter_ns()
        self.conn.execute("BEGIN")
        self.conn.execute("INSERT INTO bench_floor (v) VALUES (%s)", (f"{self.count}:{MESSAGE}",))
        self.conn.execute("COMMIT")
        return time.perf_counter_ns() - start

    def close(self) -> None:
        self.conn.close()


def step_vs_floor(journal: Journal, floor: Floor, steps: int, label: str) -> dict[str, Any]:
    run = journal.admit(f"floor-{label}", f"in-floor-{label}", "0" * 64).run
    warmup = max(5, steps // 10)
    step_ns, floor_ns = [], []
    for seq in range(steps + warmup):
        floor_first = seq % 2 == 0
        f = floor.sample() if floor_first else 0
        start = time.perf_counter_ns()
        _step(journal, run.id, seq)
        elapsed = time.perf_counter_ns() - start
        if not floor_first:
            f = floor.sample()
        if seq >= warmup:
            step_ns.append(elapsed)
            floor_ns.append(f)
    step, fl = _stats(step_ns), _stats(floor_ns)
    return {"step": step, "floor": fl, "ratio_to_floor": step["median_us"] / fl["median_us"]}


def concurrent_steps(journal: Journal, runs: int, seconds: float) -> dict[str, Any]:
    """``runs`` threads, each stepping its own run, for ``seconds``."""
    tag = uuid.uuid4().hex[:6]
    run_ids = [journal.admit(f"c{tag}-{i}", f"in-c{tag}-{i}", "0" * 64).run.id for i in range(runs)]
    barrier = threading.Barrier(runs + 1)
    stop = threading.Event()
    counts = [0] * runs
    latencies: list[list[int]] = [[] for _ in range(runs)]

    def worker(i: int) -> None:
        barrier.wait()
        seq = 0
        while not stop.is_set():
            start = time.perf_counter_ns()
            _step(journal, run_ids[i], seq)
            latencies[i].append(time.perf_counter_ns() - start)
            seq += 1
            counts[i] += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(runs)]
    for t in threads:
        t.start()
    retries_before = journal.store.retries  # type: ignore[attr-defined]
    barrier.wait()
    started = time.monotonic()
    time.sleep(seconds)  # the measuring window
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    all_latencies = [x for per_run in latencies for x in per_run]
    return {
        "runs": runs,
        "steps": sum(counts),
        "steps_per_s": sum(counts) / elapsed,
        "step_latency": _stats(all_latencies),
        "serialisation_retries": journal.store.retries - retries_before,  # type: ignore[attr-defined]
    }


def _sweeper(dsn: str, namespace: str, worker: str, start: Any, out: Any, finish: Any) -> None:
    # with its liveness lock, as a server opens it (A0_DURABILITY_LIVENESS is on by default)
    journal = Journal.open_postgres(
        dsn, namespace=namespace, worker_id=worker, pool_size=2, liveness=True
    )
    claimed: list[str] = []
    try:
        out.put(("ready", worker))
        start.wait()
        while True:
            won = journal.cluster.sweep(limit=2)  # type: ignore[union-attr]
            if not won:
                break
            claimed += [c.run_id for c in won]
        out.put((worker, claimed, time.monotonic()))
        # stay alive until every sweeper is done: a closed worker's liveness lock is free,
        # so the others would rightly take its runs over again (docs/shared-workers.md)
        finish.wait(600)
    finally:
        journal.close()


def claims_per_second(
    dsn: str, namespace: str, workers: int, backlog: int, orphaned: bool = False
) -> dict[str, Any]:
    ns = f"{namespace}_claims_{workers}{'_orphaned' if orphaned else ''}"
    # unclaimed: no worker id; orphaned: claimed by a worker whose liveness lock is then
    # given up without releasing its claims (closed, as its death would end its session)
    admin = Journal.open_postgres(
        dsn, namespace=ns, pool_size=2, worker_id="gone" if orphaned else None, liveness=orphaned
    )
    try:
        for i in range(backlog):
            admin.admit(f"b{i}", f"in-b{i}", "0" * 64)
    finally:
        admin.close()
    ctx = multiprocessing.get_context("spawn")
    start, finish, out = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_sweeper, args=(dsn, ns, f"w{i}", start, out, finish))
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every process has opened its journal before the start signal
        assert out.get(timeout=120)[0] == "ready"
    began = time.monotonic()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    finish.set()
    for p in procs:
        p.join(timeout=60)
    ended = max(r[2] for r in results)
    claimed = [run_id for r in results for run_id in r[1]]
    return {
        "workers": workers,
        "backlog": "orphaned" if orphaned else "unclaimed",
        "runs": backlog,
        "claimed": len(claimed),
        "claimed_twice": len(claimed) - len(set(claimed)),
        "claims_per_s": len(claimed) / (ended - began),
        "per_worker": {r[0]: len(r[1]) for r in results},
        "largest_share": max(len(r[1]) for r in results) / max(1, len(claimed)),
    }


def run_bench(
    dsn: str, steps: int, seconds: float, backlog: int, orphaned: bool = False
) -> dict[str, Any]:
    namespace = "bench_" + uuid.uuid4().hex[:10]
    started = time.monotonic()
    result: dict[str, Any] = {"bench": "postgres_journal", "steps": steps, "seconds": seconds}
    Journal.open_postgres(dsn, namespace=namespace, pool_size=1).close()  # makes the schema
    floor = Floor(dsn, namespace)
    try:
        with Journal.open_postgres(
            dsn, namespace=namespace, worker_id="bench-worker", pool_size=32
        ) as worker:
            result["server_version"] = worker.store.run(  # type: ignore[attr-defined]
                "read", lambda c: c.execute("SHOW server_version").fetchone()[0]
            )
            result["fenced_step"] = step_vs_floor(worker, floor, steps, "fenced")
            with Journal.open_postgres(dsn, namespace=namespace, pool_size=2) as plain:
                result["unfenced_step"] = step_vs_floor(plain, floor, steps, "plain")
            result["concurrency"] = [concurrent_steps(worker, n, seconds) for n in (1, 8, 32)]
            if hasattr(worker.store, "group_commit"):  # fenced writes of runs share commits
                worker.store.group_commit = True  # type: ignore[attr-defined]
                result["concurrency_group_commit"] = [
                    concurrent_steps(worker, n, seconds) for n in (8, 32)
                ]
                worker.store.group_commit = False  # type: ignore[attr-defined]
        result["claims"] = [claims_per_second(dsn, namespace, n, backlog) for n in (1, 2, 4)]
        if orphaned:
            result["claims"] += [
                claims_per_second(dsn, namespace, n, backlog, orphaned=True) for n in (1, 2, 4)
            ]
    finally:
        floor.close()
        _drop(
            dsn,
            [namespace]
            + [f"{namespace}_claims_{n}{kind}" for n in (1, 2, 4) for kind in ("", "_orphaned")],
        )
    result["elapsed_s"] = time.monotonic() - started
    return result


@contextmanager
def postgres_dsn(dsn: str | None) -> Iterator[tuple[str, bool]]:
    """``dsn`` (False), or a private durable cluster started for the run (True) and
    destroyed after it."""
    if dsn:
        yield dsn, False
        return
    from tests.support.postgres import start_cluster

    server = start_cluster(durable=True)
    try:
        yield server.dsn, True
    finally:
        server.destroy()


def _drop(dsn: str, namespaces: list[str]) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        for ns in namespaces:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(ns)))


def table(result: dict[str, Any]) -> str:
    lines = [f"PostgreSQL {result['server_version']}"]
    for key in ("fenced_step", "unfenced_step"):
        case = result[key]
        lines.append(
            f"{key.replace('_', ' ')}: {case['step']['median_us']:.0f} us median"
            f" (p99 {case['step']['p99_us']:.0f}), floor {case['floor']['median_us']:.0f} us"
            f" -> {case['ratio_to_floor']:.2f}x floor"
        )
    grouped = [(c, " (group commit)") for c in result.get("concurrency_group_commit", [])]
    for case, label in [(c, "") for c in result["concurrency"]] + grouped:
        lines.append(
            f"{case['runs']:>2} concurrent runs{label}: {case['steps_per_s']:.0f} steps/s"
            f" (step median {case['step_latency']['median_us']:.0f} us,"
            f" p99 {case['step_latency']['p99_us']:.0f} us,"
            f" {case['serialisation_retries']} retries)"
        )
    for case in result["claims"]:
        lines.append(
            f"{case['workers']} workers, {case['backlog']} runs:"
            f" {case['claims_per_s']:.0f} claims/s"
            f" ({case['claimed']} of {case['runs']} runs, claimed twice: {case['claimed_twice']},"
            f" largest share {case['largest_share']:.0%})"
        )
    lines.append(f"{result['elapsed_s']:.1f}s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("A0_BENCH_POSTGRES_DSN"))
    parser.add_argument("--steps", type=int, default=500, help="steps per floor case")
    parser.add_argument("--seconds", type=float, default=5.0, help="per concurrency level")
    parser.add_argument("--runs", type=int, default=1000, help="backlog for the claims case")
    parser.add_argument(
        "--orphaned", action="store_true", help="also sweep a backlog of a dead worker's runs"
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    args = parser.parse_args(argv)
    with postgres_dsn(args.dsn) as (dsn, private):
        result = run_bench(dsn, args.steps, args.seconds, args.runs, args.orphaned)
    result["server"] = "private cluster (fsync on)" if private else "--dsn"
    if not args.json:
        print(table(result))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
