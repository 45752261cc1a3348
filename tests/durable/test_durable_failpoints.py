"""Failpoints at the loop's boundaries: off unless set, fire once across restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from durability import failpoints

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_unset_or_other_boundary_or_other_name_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(failpoints.CRASH_AT_ENV, raising=False)
    with failpoints.raise_instead():
        failpoints.failpoint("after_effect", "side_effect", tmp_path)
        monkeypatch.setenv(failpoints.CRASH_AT_ENV, "after_intent")
        failpoints.failpoint("after_effect", "side_effect", tmp_path)
        monkeypatch.setenv(failpoints.CRASH_AT_ENV, "after_effect")
        monkeypatch.setenv(failpoints.CRASH_MATCH_ENV, "model")
        failpoints.failpoint("after_effect", "side_effect", tmp_path)
    assert not (tmp_path / failpoints.FIRED_FILE).exists()


def test_fires_once_and_remembers_it_in_the_state_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(failpoints.CRASH_AT_ENV, "after_result")
    monkeypatch.delenv(failpoints.CRASH_MATCH_ENV, raising=False)  # empty: any call
    with failpoints.raise_instead():
        with pytest.raises(failpoints.SimulatedCrash) as hit:
            failpoints.failpoint("after_result", "response", tmp_path)
        assert (hit.value.boundary, hit.value.name) == ("after_result", "response")
        failpoints.failpoint("after_result", "response", tmp_path)  # already fired
    assert (tmp_path / failpoints.FIRED_FILE).read_text() == "after_result:\n"


def test_the_nth_hit_and_journal_points_share_the_syntax(tmp_path, monkeypatch):
    monkeypatch.setenv(failpoints.CRASH_AT_ENV, "after_intent@3")
    monkeypatch.setenv(failpoints.CRASH_MATCH_ENV, "model")
    with failpoints.raise_instead():
        failpoints.failpoint("after_intent", "model", tmp_path)
        failpoints.failpoint("after_intent", "response", tmp_path)  # another call: not a hit
        failpoints.failpoint("after_intent", "model", tmp_path)
        with pytest.raises(failpoints.SimulatedCrash):
            failpoints.failpoint("after_intent", "model", tmp_path)
        assert (tmp_path / failpoints.FIRED_FILE).read_text() == "after_intent@3:model\n"
        # a journal point has no call name and no state folder; A0_CRASH_MATCH narrows
        # only points that name a call
        monkeypatch.setenv(failpoints.CRASH_AT_ENV, failpoints.JOURNAL_POINTS[0])
        with pytest.raises(failpoints.SimulatedCrash) as hit:
            failpoints.failpoint(failpoints.JOURNAL_POINTS[0])
    assert hit.value.boundary == "journal.batch_before_commit"


def test_a_real_sigkill_then_the_restarted_process_goes_on(tmp_path):
    code = (
        "import sys; from pathlib import Path; from durability.failpoints import failpoint;"
        "failpoint('after_effect', 'side_effect', Path(sys.argv[1])); print('alive')"
    )
    env = {**os.environ, "A0_CRASH_AT": "after_effect", "A0_CRASH_MATCH": "side_effect"}

    def run() -> subprocess.CompletedProcess:
        argv = [sys.executable, "-c", code, str(tmp_path)]
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    first = run()
    assert first.returncode == -signal.SIGKILL and "alive" not in first.stdout
    second = run()
    assert second.returncode == 0 and second.stdout.strip() == "alive"


def test_freeze_mode_stops_at_the_boundary_until_killed_from_outside(tmp_path):
    code = (
        "import sys; from pathlib import Path; from durability.failpoints import failpoint;"
        "failpoint('after_result', 'code_execution_tool', Path(sys.argv[1])); print('went on')"
    )
    env = {
        **os.environ,
        "A0_CRASH_AT": "after_result",
        "A0_CRASH_MATCH": "code_execution_tool",
        "A0_CRASH_MODE": "freeze",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    fired = tmp_path / failpoints.FIRED_FILE
    try:
        deadline = time.monotonic() + 60
        while not (fired.exists() and fired.read_text()):
            assert proc.poll() is None, "the process ended instead of freezing"
            assert time.monotonic() < deadline, "the failpoint never fired"
            time.sleep(0.05)
        assert fired.read_text() == "after_result:code_execution_tool\n"
        assert proc.poll() is None  # frozen, not dead
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL and "went on" not in out


def test_a_frozen_process_kills_itself_after_its_bound(tmp_path):
    code = (
        "import sys; from pathlib import Path; from durability.failpoints import failpoint;"
        "failpoint('after_intent', 'model', Path(sys.argv[1])); print('went on')"
    )
    env = {
        **os.environ,
        "A0_CRASH_AT": "after_intent",
        "A0_CRASH_MATCH": "model",
        "A0_CRASH_MODE": "freeze",
        "A0_CRASH_FREEZE_SECONDS": "0.2",
    }
    argv = [sys.executable, "-c", code, str(tmp_path)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL and "went on" not in done.stdout


def test_every_boundary_is_documented():
    doc = (ROOT / "docs" / "durability-loop.md").read_text(encoding="utf-8")
    for boundary in failpoints.BOUNDARIES:
        assert f"`{boundary}`" in doc
    assert "A0_CRASH_MATCH" in doc and failpoints.FIRED_FILE in doc
    testing = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    assert failpoints.CRASH_MODE_ENV in testing and failpoints.FREEZE_SECONDS_ENV in testing
