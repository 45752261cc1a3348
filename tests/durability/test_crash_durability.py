"""A real SIGKILL: every write acknowledged before the kill is on disk afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from durability import Checkpoint, Journal

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import hashlib, sys, threading
    from durability import CheckpointData, Journal

    journal = Journal.open_sqlite(sys.argv[1])
    lock = threading.Lock()

    def work(t):
        i = 0
        while True:
            chat = f"chat-{t}-{i}"
            run = journal.admit(chat, f"in-{t}-{i}", hashlib.sha256(chat.encode()).hexdigest()).run
            call = journal.record_intent(run.id, agent_no=0, seq=1, kind="tool", name="x",
                                         args={"i": i}, policy="hold")
            with lock:
                print(f"intent {run.id} {call.id}", flush=True)
            journal.commit_result(call.id, {"i": i}, checkpoint=CheckpointData(
                state={"i": i}, histories={"0": [{"role": "user", "content": chat}]}))
            with lock:
                print(f"result {run.id} {call.id}", flush=True)
            i += 1

    for t in range(4):
        threading.Thread(target=work, args=(t,), daemon=True).start()
    threading.Event().wait()
    """
)


def test_acknowledged_writes_survive_sigkill(tmp_path):
    path = tmp_path / "journal.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    acked: list[tuple[str, str, str]] = []
    deadline = time.monotonic() + 60
    try:
        while sum(1 for a in acked if a[0] == "result") < 40:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer died: {proc.stderr.read()[-2000:]}")
            acked.append(tuple(line.split()))
            assert time.monotonic() < deadline, "writer too slow"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL

    with Journal.open_sqlite(path) as journal:
        for kind, run_id, call_id in acked:
            call = journal.get_call(call_id)
            assert call.run_id == run_id
            if kind == "result":
                assert call.state == "completed"
                cp = journal.latest_checkpoint(run_id)
                assert cp is not None and cp.state == {"i": call.result["i"]}
        # whatever was in flight is either an open intent or complete, never half-written
        for run in journal.list_runs(limit=10_000):
            for call in journal.list_calls(run.id):
                assert call.state in ("open", "completed")
                if call.state == "completed":
                    assert isinstance(journal.latest_checkpoint(run.id), Checkpoint)
        assert journal.integrity_check(full=True) == []
