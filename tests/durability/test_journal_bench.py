"""The journal benchmark runs, measures what it claims, and cleans up after itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_bench_runs_and_reports(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "journal_bench.py"),
            "--steps",
            "60",
            "--dir",
            str(tmp_path),
            # a loaded machine may stall a step past the server's 5 ms bound (the result
            # then commits alone): a long bound makes riding on the next intent certain
            "--defer-ms",
            "60000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["case", "median", "us"]
    result = json.loads(lines[-1])
    assert result["steps"] == 60 and result["defer_ms"] == 60000
    assert result["floor"]["wal_pages_per_commit"] == pytest.approx(1.0)
    for case in ("constant_history", "growing_history", "growing_frozen_history"):
        data = result[case]
        assert data["commits_per_step"] == pytest.approx(2.0, abs=0.05)
        assert data["ratio_to_floor"] > 0 and data["step"]["median_us"] > 0
        assert data["ratio_to_grown_floor"] > 0 and data["grown_floor"]["median_us"] > 0
        assert data["bytes_per_step"] > 0
    for case, data in result["deferred"].items():
        assert data["commits_per_step"] < 1.1, case  # the result rides on the next intent
        assert data["wal_pages_per_result_commit"] == 0, case  # it has no commit of its own
        assert data["ratio_to_floor"] > 0 and data["step"]["median_us"] > 0, case
    assert result["worst_ratio_deferred"] > 0
    # storage per step does not grow with the history (no quadratic checkpoints)
    for case in ("growing_history", "growing_frozen_history"):
        growing = result[case]
        assert growing["bytes_per_step_second_half"] < 2 * growing["bytes_per_step_first_half"]
    assert list(tmp_path.iterdir()) == []  # its temporary folder is gone
