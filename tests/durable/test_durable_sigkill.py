"""One real process, SIGKILLed by the failpoint after a side-effect tool's intent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from python.helpers import files
from tests.durable.conftest import side_effects

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _driver(usr: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("A0_CRASH")}
    environ.update({"A0_USR_DIR": str(usr), **env})
    return subprocess.run(
        [sys.executable, "-m", "tests.durable.driver", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _result(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_sigkill_after_intent_of_a_side_effect_tool_is_held(model_server):
    usr = files.usr_dir()
    model_server.tool("side_effect", {"label": "wire-money"})
    model_server.tool("response", {"text": "sent"})
    killed = _driver(
        usr,
        "run",
        model_server.url,
        "chat-1",
        "send the money",
        A0_CRASH_AT="after_intent",
        A0_CRASH_MATCH="side_effect",
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (usr / "durability" / "failpoints-fired").read_text() == "after_intent:side_effect\n"
    assert side_effects(usr) == []
    first = _result(_driver(usr, "recover", model_server.url))
    assert first["plans"] == ["hold"]
    (run,) = first["runs"]
    assert (run["status"], run["reason"]) == ("needs_attention", "uncertain_call")
    assert run["reason_detail"]["name"] == "side_effect"
    assert side_effects(usr) == [], "the uncertain action did not run"
    assert model_server.calls == 1
    second = _result(_driver(usr, "recover", model_server.url))
    assert second["plans"] == ["skip"]
    assert second["runs"][0]["version"] == run["version"], "a held run is left alone"
