"""The PostgreSQL benchmark runs, reports every figure it promises, and cleans up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def run_bench(postgres_server, script: str, *args: str) -> dict:
    """Run ``bench/<script>`` on the test server; its JSON document (the last line)."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / script), "--dsn", postgres_server.dsn, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert (postgres_server.password or "no password") not in proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def no_bench_schema_left(postgres_server) -> bool:
    with postgres_server.connect() as conn:
        left = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'bench_%'"
        ).fetchone()[0]
    return left == 0


def test_bench_runs_and_reports(postgres_server):
    result = run_bench(
        postgres_server,
        "postgres_bench.py",
        "--steps",
        "20",
        "--seconds",
        "0.3",
        "--runs",
        "20",
        "--orphaned",
    )
    for key in ("fenced_step", "unfenced_step"):
        assert result[key]["ratio_to_floor"] > 0 and result[key]["floor"]["median_us"] > 0
    assert [c["runs"] for c in result["concurrency"]] == [1, 8, 32]
    assert all(c["steps_per_s"] > 0 for c in result["concurrency"])
    assert [c["runs"] for c in result["concurrency_group_commit"]] == [8, 32]
    assert all(c["steps_per_s"] > 0 for c in result["concurrency_group_commit"])
    assert [(c["workers"], c["backlog"]) for c in result["claims"]] == [
        (n, kind) for kind in ("unclaimed", "orphaned") for n in (1, 2, 4)
    ]
    for case in result["claims"]:
        assert case["claimed"] == case["runs"] == 20 and case["claimed_twice"] == 0
    assert no_bench_schema_left(postgres_server)


def test_the_step_profile_counts_statements_and_round_trips(postgres_server):
    """bench/postgres_step_profile.py: per unit, what the client sent and waited for (the
    hot path's server-side functions: a fenced step is 7 statements, 5 round trips)."""
    units = run_bench(postgres_server, "postgres_step_profile.py", "--steps", "5", "--sets", "1")[
        "units"
    ]
    counts = {name: (s[0]["statements"], s[0]["round_trips"]) for name, s in units.items()}
    assert counts == {
        "floor": (3, 3),
        "intent_transaction": (3, 2),
        "step_without_checkpoint": (6, 4),
        "fenced_step": (7, 5),
    }
    assert all(s[0]["server_cpu_us"] is not None for s in units.values())  # a local server
    assert no_bench_schema_left(postgres_server)
