"""Restart to resumed work: a real server killed after a committed tool result, restarted.

``restart`` mode: run_ui.py (with the scripted model of tests/support/model_server.py)
takes a task whose first tool call (``durable_plan``) SIGKILLs the process right after its
result is committed (failpoint ``A0_CRASH_AT=after_result``). The server is started again
on the same journal and timed from process start (just before the fork) to

- ``/api/health`` answering 200 (polled every 5 ms),
- the resumed run ``completed`` in the journal (read-only SQLite polls every 5 ms),

with the server's output lines stamped as they arrive (the start-up phases seen from
outside), plus ``python -X importtime`` of what run_ui.py imports before it serves.
Goal (issue #13): resumed run completed within 0.5 s of process start.

``seeded`` mode: the start-up of a server whose journal holds 1,000 chats of 50 steps
(``--chats``, ``--steps``; 1,000 finished runs, written through the journal API) against an
empty one: process start to health, to the "journal open" line, to the idle chats' summaries
read (since issue #24 an idle chat is rebuilt only when a request names it, and since its
round 4 the summaries are read in a thread while the server already answers), to the first
``/api/poll`` answered with every chat listed (what a person opening the UI waits for), and
the idle resident memory (VmRSS once the process used no CPU for 0.3 s). Goal (issue #24):
health within 1.5x of the empty journal, idle memory within 2x. Then, in-process,
the engine's half of the rebuild: the newest checkpoint of every seeded chat read back,
with all its history chains and with only those a rebuild uses.

    .venv/bin/python bench/recovery_bench.py [--mode restart|seeded|all] [--repeat N]
        [--chats N] [--steps N] [--engine sqlite|postgres] [--dsn DSN] [--dir PATH]
        [--source] [--json] [--smoke]

``--engine postgres`` (seeded mode): the journals are two namespaces of a PostgreSQL
(``--dsn`` or ``A0_BENCH_POSTGRES_DSN``, else a private cluster with fsync on, as
bench/postgres_bench.py), seeded through the journal API, and the servers start as shared
workers on them (docs/shared-workers.md).

The servers run from compiled bytecode, as a deployment does (docker/Dockerfile runs
``compileall``, pip compiles installed packages): the bench points ``PYTHONPYCACHEPREFIX``
at its temporary folder, compiles the project there and starts one untimed server first,
so nothing is compiled from source in a timed start and the checkout gets no
``__pycache__``. ``--source`` keeps the environment's setting instead (here
``PYTHONDONTWRITEBYTECODE=1``: the project compiled from source at every start, ~0.2 s).

Prints a table, then one JSON document (the last line of output).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common
from _server_process import ServerProcess, python_startup, run_ui_imports, use_bytecode, warm_up

_common.use_repo()

from tests.support.model_server import ScriptedModel  # noqa: E402

GOAL_RESUMED_S = 0.5
GOAL_SEEDED_RATIO = 1.5
GOAL_RSS_RATIO = 2.0
POLL_S = 0.005
TASK = "bench: write the plan, then answer"


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """The agent's next reply, from the conversation alone (the same after a restart)."""
    replies = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    if replies == 0:
        plan = {"title": "bench plan", "items": [{"id": "1", "text": "measure", "done": True}]}
        args = {"action": "replace", "expected_revision": 0, "plan": plan}
        return {
            "thoughts": ["plan"],
            "headline": "plan",
            "tool_name": "durable_plan",
            "tool_args": args,
        }
    return {
        "thoughts": ["done"],
        "headline": "answer",
        "tool_name": "response",
        "tool_args": {"text": "resumed and done"},
    }


def journal_path(usr: Path) -> Path:
    return usr / "durability" / "journal.sqlite"


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)


def only_run_id(usr: Path) -> str:
    conn = _read_only(journal_path(usr))
    try:
        rows = conn.execute("SELECT id FROM runs").fetchall()
    finally:
        conn.close()
    if len(rows) != 1:
        raise RuntimeError(f"expected one run in the journal, found {len(rows)}")
    return str(rows[0][0])


def wait_status(usr: Path, run_id: str, status: str, deadline: float) -> float:
    """Poll the journal (read-only) until the run has ``status``; returns when (monotonic)."""
    conn = _read_only(journal_path(usr))
    try:
        while True:
            row = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
            now = time.monotonic()
            if row is not None and row[0] == status:
                return now
            if now > deadline:
                raise RuntimeError(f"run {run_id} is {row and row[0]}, not {status}, in time")
            time.sleep(POLL_S)  # polling interval of the measurement, not a synchronisation
    finally:
        conn.close()


def restart_once(folder: Path, model: ScriptedModel, index: int) -> dict[str, Any]:
    usr = folder / f"restart-{index}" / "usr"
    crash = ServerProcess(usr, model, failpoint=("after_result", "durable_plan"))
    crash.start()
    try:
        crash.wait_healthy(deadline=time.monotonic() + 60)
        crash.send_message(TASK, input_id=f"bench-{index}")
        code = crash.wait_exit(timeout=90)
        if code != -9:
            raise RuntimeError(f"expected the failpoint's SIGKILL, got {code}:\n{crash.tail()}")
    finally:
        crash.kill()
    run_id = only_run_id(usr)
    server = ServerProcess(usr, model)
    start = server.start()
    try:
        health = server.wait_healthy(deadline=start + 60)
        done = wait_status(usr, run_id, "completed", deadline=start + 60)
        phases = server.phases()
    finally:
        server.stop()
    return {
        "to_health_s": health - start,
        "to_resumed_done_s": done - start,
        "phases_s": phases,
        "model_calls": model.calls,
    }


def seeded_start(
    usr: Path, model: ScriptedModel, env: dict[str, str] | None = None
) -> dict[str, Any]:
    server = ServerProcess(usr, model, env=env)
    start = server.start()
    try:
        health = server.wait_healthy(deadline=start + 120)
        polled, listed = server.first_poll()
        # the process quiet: on a loaded machine that takes a while
        rss = server.idle_rss_kib(deadline=time.monotonic() + 180)
        phases = server.phases()
        opened = next((line for _, line in server.lines if "journal open" in line), "")
    finally:
        server.stop()
    return {
        "journal_line": opened[opened.find("journal open") :],
        "to_health_s": health - start,
        "journal_open_s": phases.get("journal open"),
        # lifespan start to "journal open": open the journal, rebuild the chats with an
        # open run (none here), recover
        "restore_s": _between(phases, "lifespan start", "journal open"),
        # process start to the idle chats' summaries read (in a thread, since #24 round 4;
        # no such line before it)
        "idle_listed_s": phases.get("idle chats listed"),
        # process start to the first poll answered, every chat in its list
        "to_first_poll_s": polled - start,
        "chats_listed": listed,
        "idle_rss_mib": rss / 1024,
        "phases_s": phases,
    }


def _between(phases: dict[str, float], first: str, then: str) -> float | None:
    if first in phases and then in phases:
        return phases[then] - phases[first]
    return None


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def run_restart(folder: Path, repeat: int) -> dict[str, Any]:
    rows = []
    for index in range(repeat):
        with ScriptedModel() as model:
            model.respond_with(responder)
            rows.append(restart_once(folder, model, index))
    phases: dict[str, list[float]] = {}
    for row in rows:
        for name, at in row["phases_s"].items():
            phases.setdefault(name, []).append(at)
    done = _median(rows, "to_resumed_done_s")
    return {
        "runs": rows,
        "to_health_s": _median(rows, "to_health_s"),
        "to_resumed_done_s": done,
        "phases_median_s": {k: statistics.median(v) for k, v in phases.items()},
        "python_startup_s": python_startup(),
        "imports": run_ui_imports(),
        "goal_s": GOAL_RESUMED_S,
        "meets_goal": done is not None and done <= GOAL_RESUMED_S,
    }


def engine_rebuild(path: Path, repeat: int) -> dict[str, Any]:
    """In-process, the engine's half of rebuilding every chat: the newest checkpoint of
    each, with all its history chains (what the server reads today) and with only those
    a rebuild uses (``histories=``: the ``resume:`` copies left out). Median seconds for
    all chats, on a copy of the seeded journal."""
    from durability import Journal

    copy = path.parent / "engine-copy.sqlite"
    shutil.copyfile(path, copy)
    journal = Journal.open_sqlite(copy)
    try:
        chats = [r.context_id for r in journal.list_runs(limit=100_000)]
        timings: dict[str, list[float]] = {"all_chains_s": [], "current_chains_s": []}
        for _ in range(repeat):
            for key, wanted in (("all_chains_s", None), ("current_chains_s", _current_chains)):
                start = time.perf_counter()
                for context_id in chats:
                    journal.latest_context_checkpoint(context_id, histories=wanted)
                timings[key].append(time.perf_counter() - start)
    finally:
        journal.close()
        copy.unlink(missing_ok=True)
    return {"chats": len(chats), **{k: statistics.median(v) for k, v in timings.items()}}


def _current_chains(key: str) -> bool:
    return not key.startswith("resume:")


def seed_postgres(dsn: str, namespace: str, chats: int, steps: int) -> float:
    """``chats`` finished chats of ``steps`` steps in a new PostgreSQL namespace; seconds."""
    from concurrent.futures import ThreadPoolExecutor

    from _journal_seed import SEED_THREADS, seed_chat

    from durability import Journal

    started = time.monotonic()
    journal = Journal.open_postgres(dsn, namespace=namespace, pool_size=SEED_THREADS)
    with journal, ThreadPoolExecutor(SEED_THREADS) as pool:
        list(pool.map(lambda chat: seed_chat(journal, chat, steps), range(chats)))
    return time.monotonic() - started


def _postgres_env(dsn: str, namespace: str) -> dict[str, str]:
    """A shared worker on ``namespace`` (docs/shared-workers.md)."""
    from durability.crypto import generate_key

    return {
        "A0_DURABILITY_POSTGRES_DSN": dsn,
        "A0_DURABILITY_POSTGRES_NAMESPACE": namespace,
        "A0_DURABILITY_RESOURCE_KEY": generate_key(),
        "A0_WORKER_ID": "bench-worker",
    }


def _namespace_bytes(dsn: str, namespace: str) -> int:
    import psycopg

    sql = (
        "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        return int(conn.execute(sql, (namespace,)).fetchone()[0])


def run_seeded(
    folder: Path, repeat: int, chats: int, steps: int, dsn: str | None = None
) -> dict[str, Any]:
    """Seeded against empty, on SQLite, or (``dsn``) on PostgreSQL as a shared worker."""
    from _journal_seed import seed_journal

    empty_usr = folder / "empty" / "usr"
    seeded_usr = folder / "seeded" / "usr"
    envs: tuple[dict[str, str] | None, dict[str, str] | None] = (None, None)
    if dsn is None:
        seconds = seed_journal(journal_path(seeded_usr), chats, steps)
        size = journal_path(seeded_usr).stat().st_size
    else:
        suffix = os.urandom(4).hex()
        spaces = (f"bench_empty_{suffix}", f"bench_seeded_{suffix}")
        seconds = seed_postgres(dsn, spaces[1], chats, steps)
        size = _namespace_bytes(dsn, spaces[1])
        envs = (_postgres_env(dsn, spaces[0]), _postgres_env(dsn, spaces[1]))
    empty, seeded = [], []
    with ScriptedModel() as model:
        model.respond_with(responder)
        for _ in range(repeat):  # alternate, so both see the same machine weather
            empty.append(seeded_start(empty_usr, model, envs[0]))
            seeded.append(seeded_start(seeded_usr, model, envs[1]))
    out: dict[str, Any] = {
        "engine": "sqlite" if dsn is None else "postgres",
        "chats": chats,
        "steps_per_chat": steps,
        "seed_seconds": seconds,
        "journal_bytes": size,
    }
    for name, rows in (("empty", empty), ("seeded", seeded)):
        out[name] = {
            "runs": rows,
            **{
                k: _median(rows, k)
                for k in (
                    "to_health_s",
                    "journal_open_s",
                    "restore_s",
                    "idle_listed_s",
                    "to_first_poll_s",
                    "idle_rss_mib",
                )
            },
        }
    ratios = {
        key: out["seeded"][key] / out["empty"][key]
        for key in ("to_health_s", "restore_s", "to_first_poll_s", "idle_rss_mib")
        if out["seeded"][key] and out["empty"][key]
    }
    out["ratios"] = ratios
    if dsn is None:
        out["engine_rebuild"] = engine_rebuild(journal_path(seeded_usr), repeat)
    out["goal_ratio"] = GOAL_SEEDED_RATIO
    out["goal_rss_ratio"] = GOAL_RSS_RATIO
    # restore_s is a part of to_health_s, shown apart
    goals = {"to_health_s": GOAL_SEEDED_RATIO, "idle_rss_mib": GOAL_RSS_RATIO}
    out["meets_goal"] = all(k in ratios and ratios[k] <= goal for k, goal in goals.items())
    return out


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(result: dict[str, Any]) -> str:
    lines = []
    restart = result.get("restart")
    if restart:
        rows = [("restart (median of runs)", "seconds from process start")]
        rows.append(("python -c pass", f"{restart['python_startup_s']:.3f}"))
        rows.append(("import run_ui + loop (importtime)", f"{restart['imports']['total_s']:.3f}"))
        for name, at in restart["phases_median_s"].items():
            rows.append((f"  output: {name}", f"{at:.3f}"))
        rows.append(("/api/health answers", f"{restart['to_health_s']:.3f}"))
        rows.append(("resumed run completed", f"{restart['to_resumed_done_s']:.3f}"))
        lines.append(_common.render(rows))
        verdict = "meets" if restart["meets_goal"] else "MISSES"
        lines.append(f"goal: resumed run done within {restart['goal_s']} s: {verdict}")
        top = ", ".join(
            f"{m['module']} {m['cumulative_s']:.3f}" for m in restart["imports"]["largest"][:8]
        )
        lines.append(f"largest imports (s, cumulative): {top}")
    seeded = result.get("seeded")
    if seeded:
        rows = [
            (
                "start-up (median)",
                "health s",
                "journal open s",
                "restore s",
                "idle chats listed s",
                "first poll s",
                "idle RSS MiB",
            )
        ]
        for name in ("empty", "seeded"):
            r = seeded[name]
            rows.append(
                (
                    f"{name} journal",
                    f"{r['to_health_s']:.3f}",
                    _seconds(r["journal_open_s"]),
                    _seconds(r["restore_s"]),
                    _seconds(r["idle_listed_s"]),
                    _seconds(r["to_first_poll_s"]),
                    f"{r['idle_rss_mib']:.1f}",
                )
            )
        lines.append(_common.render(rows))
        engine = seeded.get("engine_rebuild")
        if engine:
            lines.append(
                f"engine, in-process: the newest checkpoint of all {engine['chats']} chats in "
                f"{engine['all_chains_s']:.3f} s with every history chain, "
                f"{engine['current_chains_s']:.3f} s with only those a rebuild uses"
            )
        ratios = ", ".join(f"{k} {v:.2f}x" for k, v in seeded["ratios"].items())
        verdict = "meets" if seeded["meets_goal"] else "MISSES"
        lines.append(
            f"{seeded['engine']}: seeded ({seeded['chats']} chats x "
            f"{seeded['steps_per_chat']} steps, "
            f"{seeded['journal_bytes'] / 1e6:.1f} MB, seeded in {seeded['seed_seconds']:.1f}s) "
            f"over empty: {ratios}: {verdict} the goal (health <= {seeded['goal_ratio']}x, "
            f"RSS <= {seeded['goal_rss_ratio']}x)"
        )
    env = result["environment"]
    compiled = (
        "from bytecode compiled first (PYTHONPYCACHEPREFIX in the bench's folder)"
        if result["bytecode"]
        else "bytecode as the environment has it (--source)"
    )
    lines.append(f"servers ran {compiled}")
    lines.append(f"load average {env['load_average']}; {result['seconds']:.1f}s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("restart", "seeded", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=3, help="starts per measurement")
    parser.add_argument("--chats", type=int, default=1000, help="seeded chats (default 1000)")
    parser.add_argument("--steps", type=int, default=50, help="steps per seeded chat")
    parser.add_argument("--dir", type=Path, help="folder for the usr dirs (a temp dir)")
    parser.add_argument(
        "--engine",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="--mode seeded: the journal's engine; postgres starts shared workers on --dsn",
    )
    parser.add_argument(
        "--dsn",
        default=os.environ.get("A0_BENCH_POSTGRES_DSN"),
        help="PostgreSQL for --engine postgres (else a private cluster, fsync on)",
    )
    parser.add_argument(
        "--source",
        action="store_true",
        help="do not compile bytecode first (the environment decides, as before round 5)",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON document")
    parser.add_argument("--smoke", action="store_true", help="one start each, 4 chats x 4 steps")
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeat, args.chats, args.steps = 1, 4, 4
    if args.repeat < 1 or args.chats < 1 or args.steps < 1:
        parser.error("--repeat, --chats and --steps must be at least 1")
    started = time.monotonic()
    server: Any = None  # a private PostgreSQL cluster (--engine postgres without --dsn)
    folder = Path(tempfile.mkdtemp(prefix="recovery-bench-", dir=args.dir))
    result: dict[str, Any] = {
        "bench": "recovery",
        "folder": str(folder),
        "mode": args.mode,
        "environment": _common.environment(),
        "bytecode": not args.source,
    }
    try:
        if not args.source:
            use_bytecode(folder / "pycache")
            with ScriptedModel() as model:
                model.respond_with(responder)
                warm_up(folder / "warm-up" / "usr", model)
        if args.mode in ("restart", "all"):
            result["restart"] = run_restart(folder, args.repeat)
        if args.mode in ("seeded", "all"):
            dsn = None
            if args.engine == "postgres":
                dsn = args.dsn
                if not dsn:
                    from tests.support.postgres import start_cluster

                    server = start_cluster(durable=True)
                    dsn = server.dsn
            result["seeded"] = run_seeded(folder, args.repeat, args.chats, args.steps, dsn)
    finally:
        if server is not None:
            server.destroy()
        shutil.rmtree(folder, ignore_errors=True)
    return _common.report(result, started, table, args.json)


if __name__ == "__main__":
    os.umask(0o077)
    raise SystemExit(main())
