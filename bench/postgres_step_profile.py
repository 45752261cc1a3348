"""Where a fenced step's time goes on PostgreSQL, next to the floor's (issue #24, goal 2).

For the floor (a single-row INSERT in its own transaction, as bench/postgres_bench.py
samples it), a fenced intent transaction, a fenced step without a checkpoint and a fenced
step (intent, then the result with a 20-message checkpoint, as postgres_bench.py's), each
run ``--steps`` times in a row by one shared worker on one connection, ``--sets`` times:

- ``statements`` and ``round_trips`` per unit: counted by wrapping psycopg's
  ``Cursor.execute`` and ``Connection.wait`` (a round trip: a statement outside pipeline
  mode, a fetch, sync or exit of a pipeline);
- ``client_cpu_us``: user + system time of this process (``os.times``);
- ``server_cpu_us``: the CPU time of the server processes serving it (the journal's and the
  floor's backends and the WAL writer, from ``/proc/<pid>/schedstat``; None when the server
  runs on another machine);
- ``wal_bytes`` (how far the WAL's insert position moved) and ``wall_us``.

The CPU figures grow with the machine's load, evenly enough that units compare.

    .venv/bin/python bench/postgres_step_profile.py [--dsn DSN] [--steps N] [--sets N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common

_common.use_repo()

import psycopg  # noqa: E402
from postgres_bench import Floor, _drop, _step, postgres_dsn  # noqa: E402

from durability import Journal  # noqa: E402

#: psycopg's generators after which the client waits for the server (see round_trips)
_WAITS = ("_fetch_gen", "_sync_gen", "_exit_gen")


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Count the statements psycopg sends and the times it waits for the server."""
    counts = {"statements": 0, "round_trips": 0}
    execute, wait = psycopg.Cursor.execute, psycopg.Connection.wait

    def counted_execute(self: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        counts["statements"] += 1
        return execute(self, query, params, **kwargs)

    def counted_wait(self: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
        name = getattr(gen, "__name__", "")
        if name in _WAITS or (name == "_execute_gen" and self._pipeline is None):
            counts["round_trips"] += 1
        return wait(self, gen, *args, **kwargs)

    psycopg.Cursor.execute, psycopg.Connection.wait = counted_execute, counted_wait  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        psycopg.Cursor.execute, psycopg.Connection.wait = execute, wait  # type: ignore[method-assign]


class Server:
    """The server processes' CPU time and WAL bytes, read on an admin connection."""

    def __init__(self, dsn: str, floor_pid: int) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.floor_pid = floor_pid

    def pids(self) -> list[int]:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'agent-zero'"
            " OR pid = %s OR backend_type = 'walwriter'",
            (self.floor_pid,),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def sample(self, pids: list[int]) -> tuple[int | None, int]:
        cpu: int | None = 0
        for pid in pids:
            try:
                cpu = (cpu or 0) + int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                cpu = None  # not this machine's process
                break
        wal = self.conn.execute(  # the WAL's insert position, in bytes
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint"
        ).fetchone()
        return cpu, int(wal[0]) if wal else 0


def measure(server: Server, unit: Callable[[int], None], steps: int, first: int) -> dict[str, Any]:
    pids = server.pids()
    srv0, wal0 = server.sample(pids)
    with counting() as counts:
        cpu0, t0 = os.times(), time.perf_counter()
        for i in range(steps):
            unit(first + i)
        cpu1, t1 = os.times(), time.perf_counter()
    srv1, wal1 = server.sample(pids)
    client = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "statements": counts["statements"] / steps,
        "round_trips": counts["round_trips"] / steps,
        "client_cpu_us": client / steps * 1e6,
        "server_cpu_us": None if srv0 is None or srv1 is None else (srv1 - srv0) / steps / 1e3,
        "wal_bytes": (wal1 - wal0) / steps,
        "wall_us": (t1 - t0) / steps * 1e6,
    }


def run_profile(dsn: str, steps: int, sets: int) -> dict[str, Any]:
    namespace = "bench_" + uuid.uuid4().hex[:10]
    journal = Journal.open_postgres(dsn, namespace=namespace, worker_id="profile", pool_size=1)
    floor = Floor(dsn, namespace)
    server = Server(dsn, floor.conn.info.backend_pid)
    try:
        runs = [journal.admit(f"p{i}", f"in-p{i}", "0" * 64).run.id for i in range(3)]

        def intent(seq: int) -> None:
            journal.record_intent(
                runs[1], agent_no=0, seq=seq, kind="tool", name="noop", args={}, policy="never"
            )

        def no_checkpoint(seq: int) -> None:
            call = journal.record_intent(
                runs[2], agent_no=0, seq=seq, kind="tool", name="noop", args={}, policy="never"
            )
            journal.commit_result(call.id, {"ok": True})

        units: dict[str, Callable[[int], None]] = {
            "floor": lambda seq: (floor.sample(), None)[1],
            "intent_transaction": intent,
            "step_without_checkpoint": no_checkpoint,
            "fenced_step": lambda seq: _step(journal, runs[0], seq),
        }
        for unit in units.values():  # warm-up: caches, prepared statements
            for seq in range(20):
                unit(seq)
        result: dict[str, Any] = {name: [] for name in units}
        for n in range(sets):
            for name, unit in units.items():
                result[name].append(measure(server, unit, steps, 1000 * (n + 1)))
        return result
    finally:
        server.conn.close()
        floor.close()
        journal.close()
        _drop(dsn, [namespace])


def table(result: dict[str, Any]) -> str:
    rows = [["unit", "statements", "round trips", "client CPU us", "server CPU us", "WAL B"]]
    for name, sets in result["units"].items():
        for s in sets:
            server = "-" if s["server_cpu_us"] is None else f"{s['server_cpu_us']:.0f}"
            rows.append(
                [
                    name,
                    f"{s['statements']:.1f}",
                    f"{s['round_trips']:.1f}",
                    f"{s['client_cpu_us']:.0f}",
                    server,
                    f"{s['wal_bytes']:.0f}",
                ]
            )
    return _common.render(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("A0_BENCH_POSTGRES_DSN"))
    parser.add_argument("--steps", type=int, default=300, help="units in a row per set")
    parser.add_argument("--sets", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with postgres_dsn(args.dsn) as (dsn, _):
        units = run_profile(dsn, max(1, args.steps), max(1, args.sets))
    result = {"bench": "postgres_step_profile", "units": units, **_common.environment()}
    return _common.report(result, started, table, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
