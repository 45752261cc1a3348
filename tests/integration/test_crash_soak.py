"""Random-kill soak (issue #4): a long job mixing every call class is SIGKILLed at random
moments, again and again, until it completes. A held run is decided the way a person
would: by reading the side-effect log. Nothing may run twice and nothing committed may
be lost. Set A0_SOAK_SEED to replay a failing schedule."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration._crash_matrix_support import (
    EFFECT_LABEL,
    dump,
    effects,
    job_effects,
    job_message,
    plan_of,
    soak_responder,
)
from tests.integration._durable_system import (
    Crashable,
    assert_no_repeats,
    crashable,
    install_side_effect_tool,
)
from tests.integration._helpers import wait_until
from tests.support.ui_server import REPO, VENV_PYTHON

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["crashable"]  # the fixture

STEPS = 50  # tool steps per job, then the answer
KILLS = 30
KILL_AFTER = (0.2, 1.4)  # seconds of life before the next SIGKILL (the random schedule)


class Soak:
    """The test's bookkeeping: jobs sent, kills, decisions, every committed call seen."""

    def __init__(self, crashable: Crashable, seed: int) -> None:
        self.crashable = crashable
        self.rng = random.Random(seed)
        self.seed = seed
        self.kills = 0
        self.jobs: list[str] = []
        self.decisions: list[tuple[str, str, str]] = []
        self.committed: dict[str, tuple[str, str | None]] = {}

    def why(self, extra: Any = "") -> str:
        return f"seed={self.seed} kills={self.kills} decisions={self.decisions} {extra}"

    def send_job(self) -> None:
        job = f"j{len(self.jobs) + 1}"
        self.jobs.append(job)
        server = self.crashable.server
        assert server is not None

        def send() -> None:
            try:
                server.api_message(job_message(job, STEPS), input_id=job)
            except httpx.HTTPError:
                pass  # the server was killed under the request; the run lives on

        threading.Thread(target=send, daemon=True).start()
        wait_until(lambda: self.current(), timeout=60, what=f"job {job} admitted")

    def current(self) -> dict[str, Any] | None:
        rows = [r for r in self.crashable.runs() if r["input_id"] == self.jobs[-1]]
        return self.crashable.run(rows[0]["run_id"]) if rows else None

    def kill_at_random(self) -> None:
        time.sleep(self.rng.uniform(*KILL_AFTER))  # the kill schedule itself, not a wait
        self.crashable.kill()
        self.kills += 1
        self.crashable.start()
        self.check_nothing_lost()

    def check_nothing_lost(self) -> None:
        """Every call seen committed before a kill is still committed, with the same result."""
        for row in self.crashable.runs():
            for call in self.crashable.run(row["run_id"])["calls"]:
                key = call["call_id"]
                if key in self.committed:
                    assert (call["status"], call["result"]) == self.committed[key], self.why(
                        dump(call)
                    )
                elif call["committed"]:
                    self.committed[key] = (call["status"], call["result"])

    def decide_if_held(self, run: dict[str, Any]) -> None:
        """A person reads the side-effect log and decides."""
        assert run["reason"] in ("uncertain_call", "recovery_attempts_exceeded"), self.why(
            dump(run)
        )
        open_calls = [c for c in run["calls"] if c["status"] == "open"]
        decision, note = "resume", None
        if open_calls:
            call = open_calls[-1]
            found = EFFECT_LABEL.search(call["args"] or "")
            if found and found.group(0) in effects(self.crashable):
                decision, note = "confirmed_completed", f"the log shows {found.group(0)}"
            else:
                decision, note = "confirmed_not_completed", "not in the side-effect log"
        self.decisions.append((run["run_id"][:8], decision, run["reason"]))
        extra = {"note": note} if note else {}
        response = self.crashable.decide(run, decision, **extra)
        assert response.status_code == 200, self.why(response.text)

    def settle(self) -> dict[str, Any]:
        """Wait for the current job to complete, deciding every hold."""

        def ended() -> dict[str, Any] | None:
            run = self.current()
            assert run is not None
            if run["status"] == "needs_attention":
                self.decide_if_held(run)
                return None
            assert run["status"] in ("active", "completed"), self.why(dump(run))
            return run if run["status"] == "completed" else None

        return wait_until(ended, timeout=120, what=f"job {self.jobs[-1]} to complete")


def _python() -> Path:
    """The project's venv python, else this one (a worktree without its own .venv)."""
    return VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable)


def exported_calls(crashable: Crashable, run_id: str) -> dict[str, dict[str, Any]]:
    """The run's calls as ``python -m durability export`` reads them from the file."""
    db = crashable.usr / "durability" / "journal.sqlite"
    done = subprocess.run(
        [str(_python()), "-m", "durability", "export", run_id, "--db", str(db)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {r["id"]: r for r in records if r["type"] == "call"}


@pytest.mark.timeout(900)
def test_random_kills_never_repeat_a_side_effect_nor_lose_a_committed_call(crashable, model_server):
    seed = int(os.environ.get("A0_SOAK_SEED") or random.SystemRandom().randrange(1 << 30))
    soak = Soak(crashable, seed)
    install_side_effect_tool(crashable.usr)
    model_server.respond_with(soak_responder(crashable.usr))
    crashable.start()
    soak.send_job()

    while soak.kills < KILLS:
        run = soak.current()
        assert run is not None
        if run["status"] == "needs_attention":
            soak.decide_if_held(run)
        elif run["status"] == "completed":
            soak.send_job()  # the job finished before enough kills: one more job
        else:
            assert run["status"] == "active", soak.why(dump(run))
        soak.kill_at_random()
    soak.settle()
    soak.check_nothing_lost()

    lines = effects(crashable)
    assert_no_repeats(lines)
    expected = [line for job in soak.jobs for line in job_effects(job, STEPS)]
    assert sorted(lines) == sorted(expected), soak.why(f"log={lines}")
    runs = crashable.runs()
    assert len(runs) == len(soak.jobs), soak.why(dump(runs))
    assert {r["status"] for r in runs} == {"completed"}, soak.why(dump(runs))
    model_rows = 0
    for row in runs:
        detail = crashable.run(row["run_id"])
        model_rows += sum(1 for c in detail["calls"] if c["kind"] == "model")
        assert not [c for c in detail["calls"] if c["status"] == "open"], soak.why(dump(detail))
        plan = plan_of(crashable, row["context_id"])
        assert plan["revision"] == STEPS // 5 and plan["conflicts"] == [], soak.why(dump(plan))
        again = crashable.server.api_message(
            job_message(row["input_id"], STEPS),
            input_id=row["input_id"],
            context_id=row["context_id"],
        )
        assert again.json()["response"] == f"job {row['input_id']} done", soak.why(again.text)
    # a committed reply is never asked for again: every model request has its own journaled
    # call (a kill between intent and request leaves a call without a request, never the reverse)
    assert model_server.calls <= model_rows, soak.why(f"{model_server.calls} > {model_rows}")
    assert model_rows >= (STEPS + 1) * len(soak.jobs), soak.why()
    crashable.stop()

    exported: dict[str, dict[str, Any]] = {}
    for row in runs:
        exported.update(exported_calls(crashable, row["run_id"]))
    lost = [
        key
        for key, (status, _) in soak.committed.items()
        if key not in exported or exported[key]["state"] != status
    ]
    assert len(soak.committed) >= 2 * STEPS, soak.why(len(soak.committed))
    assert not lost, soak.why(f"committed calls lost from the file: {lost}")
