"""The PostgreSQL benchmark runs, reports every figure it promises, and cleans up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]


def test_bench_runs_and_reports(postgres_server):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "postgres_bench.py"),
            "--dsn",
            postgres_server.dsn,
            "--steps",
            "20",
            "--seconds",
            "0.3",
            "--runs",
            "20",
            "--orphaned",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert (postgres_server.password or "no password") not in proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
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
    with postgres_server.connect() as conn:
        left = conn.execute(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'bench_%'"
        ).fetchone()[0]
    assert left == 0
