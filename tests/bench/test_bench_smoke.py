"""Each bench runs its smallest size and reports what it claims, so the benches cannot rot.

Speed goals are never asserted here (they live in bench/README.md); these tests check
that each bench runs, measures the parts it names and cleans up after itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"


def run_bench(
    script: str, *args: str, python: str = sys.executable, timeout: float = 120
) -> dict[str, Any]:
    proc = subprocess.run(
        [python, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_journal_concurrency_smoke(tmp_path: Path) -> None:
    result = run_bench("journal_concurrency.py", "--smoke", "--dir", str(tmp_path))
    levels = [(r["variant"], r["runs"]) for r in result["results"]]
    variants = ("asyncio", "asyncio-deferred", "threads", "threads-deferred")
    assert levels == [(variant, runs) for variant in variants for runs in (1, 4)]
    for level in result["results"]:
        assert level["steps"] == 40
        assert level["deferred"] == level["variant"].endswith("-deferred")
        assert level["steps_per_s"] > 0 and level["floor"]["median_us"] > 0
        assert level["cpu_us_per_step"] > 0 and level["switches_per_step"] >= 0
        assert level["step"]["p99_us"] >= level["step"]["median_us"] > 0
        # a step is two transactions of its own, or fewer when batched with other runs
        assert 0 < level["transactions"] <= level["writes"] == 80
        if level["runs"] == 1 and not level["deferred"]:
            assert level["commits_per_batch"] == pytest.approx(1.0)
        if level["runs"] == 1 and level["deferred"]:
            # the result rides on the next intent: one transaction per step, plus the
            # last result's (flushed at the end) and those a stalled step let commit alone
            alone = level["deferred_committed_alone"]
            assert 40 + alone <= level["transactions"] <= 41 + alone
    assert result["meets_goal"] is None  # the goal is measured at 32 runs only
    assert list(tmp_path.iterdir()) == []  # its temporary folder is gone


def _peers_venv() -> Path | None:
    python = BENCH / ".venv-peers" / "bin" / "python"
    return python if python.exists() else None


def test_peers_smoke(tmp_path: Path) -> None:
    """All three systems when the peers' venv exists (bash bench/setup_peers.sh); else
    ours alone. The peers' packages are bench-only, so CI does not require them."""
    systems = ["ours", "dbos", "langgraph"] if _peers_venv() else ["ours"]
    result = run_bench(
        "peers.py", "--smoke", "--systems", ",".join(systems), "--dir", str(tmp_path), timeout=180
    )
    assert sorted(result["systems"]) == sorted(systems)
    for name in systems:
        measured = result["systems"][name]
        assert measured["single"]["step"]["count"] > 0
        assert measured["single"]["ratio_to_floor"] > 0
        assert measured["concurrent"]["steps_per_s"] > 0
        assert measured["growing"]["bytes_total"] > 0
    assert result["systems"]["ours"]["single"]["commits_per_step"] == pytest.approx(2.0)
    assert set(result["ratios"]) == set(systems) - {"ours"}
    assert list(tmp_path.iterdir()) == []


def test_peers_without_their_venv_says_how_to_make_it(tmp_path: Path) -> None:
    env = {**os.environ, "A0_BENCH_PEERS_PYTHON": str(tmp_path / "no-such-python")}
    proc = subprocess.run(
        [sys.executable, str(BENCH / "peers.py"), "--smoke", "--systems", "ours,dbos"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 2
    assert "bench/setup_peers.sh" in proc.stderr


def test_recovery_bench_smoke(tmp_path: Path) -> None:
    """A real server killed after a committed tool result, restarted, its run resumed;
    then an empty and a seeded journal started once each."""
    result = run_bench("recovery_bench.py", "--smoke", "--dir", str(tmp_path), timeout=240)
    restart = result["restart"]
    (run,) = restart["runs"]
    assert 0 < run["to_health_s"] <= run["to_resumed_done_s"]
    assert run["model_calls"] == 2  # the plan call before the crash, the answer after it
    phases = run["phases_s"]
    assert phases["journal open"] <= run["to_health_s"]
    assert restart["imports"]["total_s"] > 0
    assert any(m["module"] == "run_ui" for m in restart["imports"]["largest"])
    seeded = result["seeded"]
    (empty,), (full,) = seeded["empty"]["runs"], seeded["seeded"]["runs"]
    assert empty["journal_line"].startswith("journal open: 0 chats")
    # no open run: every chat is left for later, listed from its summary (issue #24)
    assert full["journal_line"].startswith("journal open: 0 chats, 0 runs recovered, 0 held")
    assert full["to_health_s"] > 0 and full["journal_open_s"] > 0
    # nothing is rebuilt in the background any more: a chat is rebuilt when a request names it
    # their summaries read in a thread while the server answers; the first poll lists them
    assert full["chats_listed"] == 4 and empty["chats_listed"] == 0
    assert full["to_first_poll_s"] >= full["to_health_s"] > 0
    assert seeded["engine"] == "sqlite" and seeded["engine_rebuild"]["chats"] == 4
    assert empty["idle_rss_mib"] > 10 and full["idle_rss_mib"] > 10
    assert set(seeded["ratios"]) == {"to_health_s", "restore_s", "to_first_poll_s", "idle_rss_mib"}
    assert (seeded["goal_ratio"], seeded["goal_rss_ratio"]) == (1.5, 2.0)  # issue #24
    assert full["restore_s"] > 0
    assert list(tmp_path.iterdir()) == []


def test_bytes_bench_smoke(tmp_path: Path) -> None:
    """A real server's full turns through the HTTP API: start-up, memory, latency and the
    bytes each turn writes, with the breakdown by file when strace is there."""
    result = run_bench("bytes_bench.py", "--smoke", "--dir", str(tmp_path), timeout=240)
    (one,) = result["runs"]
    assert one["to_health_s"] > 0 and one["idle_rss_mib"] > 10
    summary = result["summary"]
    for kind in ("new_chat", "same_chat"):
        measured = one[kind]
        assert measured["turns"] == 2
        assert measured["latency_ms"] > 0
        assert measured["write_kib"] > 0  # every commit reaches the disk
        assert measured["calls_per_turn"] == 2  # one step: the model call and the response
        assert measured["tables"]["checkpoint_rows"] >= 1
        assert summary[kind]["write_kib_per_call"] > 0
        traced = measured.get("traced")
        if traced is not None:  # strace on PATH: the WAL's bytes and one fsync per commit
            assert traced["wal_bytes"] > 0 and traced["wal_syncs"] >= 1
    assert summary["goals_kib"] == {"new_chat": 100, "same_chat": 120}
    assert list(tmp_path.iterdir()) == []


def test_wal_profile_smoke(tmp_path: Path) -> None:
    """Same-chat turns read back from the WAL: frames per commit, mapped to the tables."""
    result = run_bench("wal_profile.py", "--smoke", "--dir", str(tmp_path), timeout=240)
    assert result["turns"] + result["skipped_wal_reset"] == 2
    for profile in result["profiles"]:
        assert profile["frames"] == sum(sum(c.values()) for c in profile["commits"])
        assert len(profile["commits"]) >= 3  # admission, the intents, the end: each commits
        assert any("checkpoints" in commit for commit in profile["commits"])
    assert result["turns"] == 0 or "runs" in result["frames_per_turn_by_table"]
    assert list(tmp_path.iterdir()) == []


def test_poll_bench_smoke(tmp_path: Path) -> None:
    """The UI's poll of a long chat: whole log once, then nothing new, then only new items."""
    result = run_bench("poll_bench.py", "--smoke", "--dir", str(tmp_path), timeout=240)
    (one,) = result["runs"]
    assert one["log_items"] == 200  # the seeded long chat, whole
    assert one["chats_listed"] == 3  # it and the two small chats
    assert one["idle_poll_ms"]["count"] == 20 and one["idle_poll_items_sent"] == 0
    after = one["after_turn"]
    assert after["new_items"] > 0
    assert 0 < after["items_sent"] <= after["new_items"] + 1  # only what changed
    assert result["summary"]["only_new_items_sent"] is True
    assert list(tmp_path.iterdir()) == []


def test_memory_bench_smoke(tmp_path: Path) -> None:
    result = run_bench("memory_bench.py", "--smoke", "--dir", str(tmp_path), timeout=300)
    sizes = [(r["size"], r["dim"]) for r in result["results"]]
    assert sizes == [(1_000, 384), (10_000, 384), (1_000, 1536), (10_000, 1536)]
    for row in result["results"]:
        assert row["ours"]["p95_ms"] >= row["ours"]["p50_ms"] > 0
        assert row["save_ms"] > 0 and row["journal_commit_ms"] > 0 and row["rss_mb"] > 0
        assert row["first_search_ms"] > 0 and row["rounds"] == 1
        if result["faiss"] is None:
            assert row["faiss"] is None  # skipped, and the output said so
        else:
            assert row["same_top"] is True and row["same_top10"] is True  # both are exact
    assert result["backend"] == "sqlite-vec"
    assert list(tmp_path.iterdir()) == []  # its temporary folder is gone


def _postgres_args() -> list[str]:
    """The ``--dsn`` a PostgreSQL bench is given (none: it starts a private cluster). A
    missing driver or server fails in CI and skips elsewhere."""
    from tests.support.postgres import DSN_ENV, PG_BIN

    missing = []
    try:
        import psycopg  # noqa: F401
    except ImportError:
        missing.append("psycopg")
    if not (PG_BIN / "initdb").exists() and not os.environ.get(DSN_ENV):
        missing.append("PostgreSQL binaries or A0_TEST_POSTGRES_DSN")
    if missing:
        if os.environ.get("CI"):  # in CI a missing prerequisite fails, never skips
            pytest.fail(f"missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)}")
    return ["--dsn", os.environ[DSN_ENV]] if os.environ.get(DSN_ENV) else []


def test_takeover_bench_smoke() -> None:
    """One round: two run_ui.py workers on a private PostgreSQL cluster, A killed mid-run,
    B's claim measured; the figure is reported next to the default lease."""
    args = ["--smoke", *_postgres_args()]
    result = run_bench("takeover_bench.py", *args, timeout=300)
    assert result["rounds"] == 1 and result["lease_s"] == 30.0
    [sample] = result["samples_s"]
    assert 0 < sample < 2 * result["lease_s"]
    assert result["median_s"] == result["p95_s"] == sample
    assert result["meets_goal"] in (True, False)


def test_recovery_bench_seeded_postgres_smoke(tmp_path: Path) -> None:
    """The seeded start-up on PostgreSQL (issue #24, goal 4): shared workers on an empty and
    a seeded namespace of a private cluster (or A0_TEST_POSTGRES_DSN), started once each."""
    args = ["--smoke", "--mode", "seeded", "--engine", "postgres", "--dir", str(tmp_path)]
    args += _postgres_args()
    result = run_bench("recovery_bench.py", *args, timeout=300)
    seeded = result["seeded"]
    assert seeded["engine"] == "postgres" and "engine_rebuild" not in seeded
    (empty,), (full,) = seeded["empty"]["runs"], seeded["seeded"]["runs"]
    assert empty["journal_line"].startswith("journal open (namespace bench_empty_")
    assert full["journal_line"].endswith("): 0 chats"), full["journal_line"]
    assert full["chats_listed"] == 4 and empty["chats_listed"] == 0
    assert full["to_health_s"] > 0 and full["idle_rss_mib"] > 10
    assert set(seeded["ratios"]) == {"to_health_s", "restore_s", "to_first_poll_s", "idle_rss_mib"}
    assert list(tmp_path.iterdir()) == []
