"""Failpoints at the loop's boundaries: off unless set, fire once across restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
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


def test_a_real_sigkill_then_the_restarted_process_goes_on(tmp_path):
    code = (
        "import sys; from pathlib import Path; from durability.failpoints import failpoint;"
        "failpoint('after_effect', 'side_effect', Path(sys.argv[1])); print('alive')"
    )
    env = {**os.environ, "A0_CRASH_AT": "after_effect", "A0_CRASH_MATCH": "side_effect"}

    def run() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    first = run()
    assert first.returncode == -signal.SIGKILL and "alive" not in first.stdout
    second = run()
    assert second.returncode == 0 and second.stdout.strip() == "alive"


def test_every_boundary_is_documented():
    doc = (ROOT / "docs" / "durability-loop.md").read_text(encoding="utf-8")
    for boundary in failpoints.BOUNDARIES:
        assert f"`{boundary}`" in doc
    assert "A0_CRASH_MATCH" in doc and failpoints.FIRED_FILE in doc
