"""Takeover in seconds (issue #24): a dead worker is known by its liveness lock
(durability/store/liveness.py), not only by its lease. Real run_ui.py workers against one
PostgreSQL journal, with the default lease (30 s): a SIGKILLed worker's run is claimed by a
live worker long before the lease; a frozen worker (SIGSTOP, its sessions still open) is
not taken over; a worker whose session ended while its process lives is taken for dead,
and fencing makes that guess safe (its late write refused, its open intent held)."""

from __future__ import annotations

import signal
import time

import pytest

from durability.store.liveness import alive_key
from tests.integration._helpers import wait_until
from tests.postgres._workers import in_background, wait_status, workers
from tests.support.model_server import model_server

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

__all__ = ["model_server", "workers"]  # the fixtures

#: The default lease, and a heartbeat as rare as allowed (half the lease), so that the old
#: owner's result write, not its heartbeat, is what meets the fence.
DEFAULT_LEASE = {"A0_DURABILITY_LEASE_SECONDS": "30", "A0_DURABILITY_HEARTBEAT_SECONDS": "15"}
#: Generous (a loaded CI machine): the bench measures the figure (bench/takeover_bench.py);
#: still well before the 30 s lease, which is what the takeover must beat.
TAKEOVER_DEADLINE = 20.0


def _shell_until(workers, model_server, gate) -> None:
    """The agent's one shell command logs its effect, then waits for ``gate``."""
    code = f"echo shell >> {workers.effects}; while [ ! -e {gate} ]; do sleep 0.05; done"
    model_server.tool("code_execution_tool", {"runtime": "terminal", "session": 0, "code": code})
    model_server.tool("response", {"text": "done"})


def test_a_killed_workers_run_is_claimed_long_before_its_lease(workers, model_server):
    """A is SIGKILLed mid shell command: its sessions end with it, its liveness lock is
    free, and B claims the run within seconds although A's lease (30 s) still runs. The
    open shell call is held, never run again."""
    gate = workers.tmp / "gate"
    _shell_until(workers, model_server, gate)
    a = workers.start("worker-a", **DEFAULT_LEASE)
    b = workers.start("worker-b", **DEFAULT_LEASE)
    in_background(lambda: a.api_message("run it", input_id="k1"))
    wait_until(lambda: workers.side_effects() == ["shell"], timeout=60, what="the command")
    [(run_id, _context_id, _)] = workers.runs()
    [(key,)] = workers.sql("SELECT alive_key FROM claims WHERE run_id = %s", run_id)
    assert key == alive_key(workers.namespace, "worker-a")
    a.kill()
    killed = time.monotonic()
    wait_until(
        lambda: workers.claimers(run_id) == ["worker-a", "worker-b"],
        timeout=TAKEOVER_DEADLINE,
        what="worker B to claim the dead worker's run before the lease",
    )
    assert time.monotonic() - killed < 30  # long before A's lease could have run out
    held = wait_status(b, run_id, "needs_attention")
    assert held["reason"] == "uncertain_call", held
    gate.touch()
    assert workers.side_effects() == ["shell"]
    assert model_server.calls == 1


def test_a_frozen_worker_keeps_its_run_until_its_lease(workers, model_server):
    """A is frozen (SIGSTOP) mid shell command for several detection intervals (B sweeps
    every second), well within its lease: its sessions stay open, its lock stays held, and
    B never claims the run. Thawed, A finishes the run itself."""
    gate = workers.tmp / "gate"
    _shell_until(workers, model_server, gate)
    lease = {"A0_DURABILITY_LEASE_SECONDS": "12", "A0_DURABILITY_HEARTBEAT_SECONDS": "2"}
    a = workers.start("worker-a", **lease)
    b = workers.start("worker-b", **lease)
    in_background(lambda: a.api_message("run it", input_id="f1"))
    wait_until(lambda: workers.side_effects() == ["shell"], timeout=60, what="the command")
    [(run_id, _context_id, _)] = workers.runs()
    assert a.process is not None
    a.process.send_signal(signal.SIGSTOP)
    try:
        # the stimulus is the freeze itself (4 s: four of B's sweeps); the claim is read
        # throughout and must never change
        frozen_until = time.monotonic() + 4.0
        while time.monotonic() < frozen_until:
            assert workers.claimers(run_id) == ["worker-a"]
            time.sleep(0.2)
        [(holder,)] = workers.sql("SELECT worker_id FROM claims WHERE run_id = %s", run_id)
        assert holder == "worker-a"
    finally:
        a.process.send_signal(signal.SIGCONT)
    gate.touch()
    wait_status(a, run_id, "completed")
    assert workers.claimers(run_id) == ["worker-a"]
    assert workers.side_effects() == ["shell"]
    assert "took run" not in b.output()


def test_a_worker_whose_session_ended_is_taken_for_dead_and_the_guess_is_safe(
    workers, model_server
):
    """A's liveness session is terminated by the server while A lives, mid shell command
    (A is kept from locking again: failpoint cluster.liveness_lost, freeze). B takes the
    run over at once and holds the open shell call; when the command ends, A's result
    write under its old token is refused by the fence, nothing of it commits, and A starts
    nothing more."""
    gate = workers.tmp / "gate"
    _shell_until(workers, model_server, gate)
    keep_unlocked = {
        "A0_CRASH_AT": "cluster.liveness_lost",
        "A0_CRASH_MODE": "freeze",
        "A0_CRASH_FREEZE_SECONDS": "300",
    }
    a = workers.start("worker-a", **DEFAULT_LEASE, **keep_unlocked)
    b = workers.start("worker-b", **DEFAULT_LEASE)
    in_background(lambda: a.api_message("run it", input_id="w1"))
    wait_until(lambda: workers.side_effects() == ["shell"], timeout=60, what="the command")
    [(run_id, _context_id, _)] = workers.runs()
    [(old_token,)] = workers.sql("SELECT token FROM claims WHERE run_id = %s", run_id)
    ended = workers.sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        "a0-alive:worker-a",
    )
    assert ended == [(True,)]
    wait_until(
        lambda: workers.claimers(run_id) == ["worker-a", "worker-b"],
        timeout=TAKEOVER_DEADLINE,
        what="worker B to take the run of a worker whose session ended",
    )
    held = wait_status(b, run_id, "needs_attention")
    assert held["reason"] == "uncertain_call", held
    [(new_token,)] = workers.sql("SELECT token FROM claims WHERE run_id = %s", run_id)
    before = workers.sql("SELECT id, state FROM calls WHERE run_id = %s ORDER BY id", run_id)
    gate.touch()  # the command ends: A has a result to write under its old token
    refused = f"fenced write refused (superseded): worker worker-a's commit_result for run {run_id}"
    wait_until(lambda: refused in a.output(), timeout=30, what="A's late write to be refused")
    assert f"under token {old_token}; the run's token is {new_token}" in a.output()
    stopped = f"run {run_id} stopped on this worker: claim lost (write refused: superseded)"
    wait_until(lambda: stopped in a.output(), timeout=30, what="A to stop the run")
    after = workers.sql("SELECT id, state FROM calls WHERE run_id = %s ORDER BY id", run_id)
    assert after == before  # nothing of A's write committed: the shell call is still open
    assert ("open" in {state for _, state in after}) and model_server.calls == 1
    assert workers.side_effects() == ["shell"]
    [(holder,)] = workers.sql("SELECT worker_id FROM claims WHERE run_id = %s", run_id)
    assert holder == "worker-b"
    assert workers.postgres.password not in a.output()
    a.kill()  # its liveness watcher is frozen: no graceful stop
