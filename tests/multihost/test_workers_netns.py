"""Three run_ui.py workers in network namespaces share one PostgreSQL journal and the
scripted model over veth links. A shell call appends to a side-effect log outside the
system, then blocks; the tests break the worker that runs it in three ways: (a) SIGKILL,
(b) its link down, (c) its database sessions terminated. Each time a peer claims the run
once the lease expired and holds it (the shell receipt stays on the first worker), the old
worker writes nothing more for the run and starts no effect, and the effect happened
once. In (b) and (c) the old worker's heartbeat is held where it would learn of the loss
(``HOLD_HEARTBEAT``), so its late result write is what reaches PostgreSQL, and the fence
refuses it (``FencingLost``, logged with the run, the call and both tokens)."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator

import pytest

from tests.multihost._workers import LEASE_SECONDS, Workers
from tests.postgres._workers import HOLD_HEARTBEAT
from tests.support.model_server import ScriptedModel
from tests.support.netns import wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.netns,
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.xdist_group("netns"),
]


@pytest.fixture
def workers(network, bridge_postgres, tmp_path) -> Iterator[Workers]:
    model = ScriptedModel(host=network.host_address).start()
    # w0, the worker every test breaks, logs in as a database role of its own (test c),
    # and its heartbeat stops where it would learn that its claim was lost (tests b, c)
    group = Workers(
        network, bridge_postgres, model, tmp_path, own_roles=(0,), own_env={0: HOLD_HEARTBEAT}
    )
    try:
        group.start()
        yield group
    finally:
        group.close()
        model.stop()


def taken_over(workers: Workers, run_id: str, old: str) -> str:
    """Wait until a peer of ``old`` holds a live claim on the run and has held it; return
    the peer's id."""

    def held_elsewhere() -> str | None:
        worker, live = workers.owner(run_id)
        if worker in (None, old) or not live:
            return None
        run = workers.journal.get_run(run_id)
        return worker if run.status == "needs_attention" else None

    return wait_for(held_elsewhere, LEASE_SECONDS + 60, f"a peer of {old} to hold the run")


def start_shell_call(workers: Workers, label: str) -> str:
    """Worker w0 runs the scripted shell call; returns the run id once the effect ran."""
    workers.script_shell_call(label)
    workers.send(0, f"run {label}", input_id=f"in-{label}")
    workers.wait_effect(label)
    run = workers.only_run()
    assert workers.owner(run.id) == ("w0", True)
    (call,) = workers.shell_calls(run.id)
    assert not call.has_result
    return run.id


def assert_once_and_held(workers: Workers, run_id: str, label: str, holder: str) -> None:
    history = workers.claim_history(run_id)
    assert [w for w, _ in history] == ["w0", holder], history
    assert history[0][1] < history[1][1], "fencing tokens only grow"
    run = workers.journal.get_run(run_id)
    assert run.status == "needs_attention", run
    (call,) = workers.shell_calls(run_id)
    assert not call.has_result, "nothing committed the shell call's result"
    assert workers.model.calls == 1, "no model call after the shell call, anywhere"
    assert workers.side_effects() == [f"effect-{label}"]
    shown = workers.api(1, "durable_run", {"run_id": run_id})  # any worker serves the run
    assert shown.status_code == 200 and shown.json()["run"]["status"] == "needs_attention"


def test_a_sigkill_mid_shell_call_a_peer_takes_the_run_over_and_holds_it(workers):
    run_id = start_shell_call(workers, "a")
    workers.servers[0].kill()
    assert workers.servers[0].process.returncode == -signal.SIGKILL
    holder = taken_over(workers, run_id, "w0")
    workers.gate.touch()  # the orphaned shell on w0's host ends; nobody records it
    assert_once_and_held(workers, run_id, "a", holder)


def journal_state(workers: Workers, run_id: str) -> tuple:
    """What the journal holds for the run: writes by anybody change it."""
    run = workers.journal.get_run(run_id)
    calls = [(c.id, c.state, c.result_digest) for c in workers.journal.list_calls(run_id)]
    events = [(e.type, e.payload) for e in workers.journal.list_events(run_id=run_id)]
    return run.status, run.version, calls, events


def shell_finished(workers: Workers, index: int) -> bool:
    receipts = workers.servers[index].usr_dir / "durability" / "receipts"
    return any(receipts.glob("*.exit"))


def refused_write(workers: Workers, run_id: str) -> re.Pattern[str]:
    """The line w0 must log when the fence refuses its first late write: the run, the token
    w0 held and the one the peer's claim carries. That write is the shell call's result, or
    the run's end when w0's loop stopped waiting for the shell while its sessions were gone
    and its logins refused (which one comes first is a matter of timing; either is refused
    and commits nothing)."""
    (call,) = workers.shell_calls(run_id)
    (_, held), (_, current) = workers.claim_history(run_id)
    return re.compile(
        re.escape("fenced write refused (superseded): worker w0's ")
        + f"(commit_result for run {run_id} \\(call {call.id}\\)"
        + f"|finish_run for run {run_id} \\(call none\\))"
        + re.escape(
            f" under token {held}; the run's token is {current}: nothing of it committed,"
            " and the worker starts no new effect for that run"
        )
    )


def refusal_logged(workers: Workers, expected: re.Pattern[str]) -> bool:
    return expected.search(workers.servers[0].output()) is not None


def wait_for_refusal(workers: Workers, expected: re.Pattern[str]) -> None:
    """Wait for w0 to log the refusal of its late write; on a timeout, show what w0 logged
    about its claims and writes instead."""
    try:
        wait_for(lambda: refusal_logged(workers, expected), 60, "w0's late write to be refused")
    except AssertionError as exc:
        said = [
            line
            for line in workers.servers[0].output().splitlines()
            if any(word in line for word in ("refused", "claim", "fenc", "stopped", "lost"))
        ]
        raise AssertionError(
            f"{exc}; expected {expected.pattern!r}; w0 said: {said[-15:]}"
        ) from None


def assert_write_found_out(workers: Workers, run_id: str) -> None:
    """Only the refused write told w0 (its heartbeat is held), and it stopped the run."""
    output = workers.servers[0].output()
    assert "heartbeat's renewal found" not in output
    assert f"run {run_id} stopped on this worker: claim lost (write refused: superseded)" in (
        output
    )
    assert workers.postgres.password not in output


def test_b_link_down_until_the_lease_expires_late_writes_are_fenced(workers):
    run_id = start_shell_call(workers, "b")
    w0 = workers.servers[0]
    w0.node.link_down()
    try:
        # w0's sessions (its liveness lock's too) live on in the server: the lease rule holds
        _, _, lease_end = workers.lease_end(run_id)
        holder = taken_over(workers, run_id, "w0")
        claimed_at = workers.claimed_at(run_id)
        assert claimed_at >= lease_end, "w0 was taken over before its lease ran out"
        before = journal_state(workers, run_id)
        expected = refused_write(workers, run_id)
        workers.gate.touch()  # the shell on w0 ends: w0 now has a result to commit
        wait_for(lambda: shell_finished(workers, 0), 60, "the shell on w0 to finish")
    finally:
        w0.node.link_up()
    # the pending result write reaches PostgreSQL under w0's old token: refused, and said
    wait_for_refusal(workers, expected)
    wait_for(lambda: workers.settled(0), 60, "w0's writes to settle")
    assert_write_found_out(workers, run_id)
    assert journal_state(workers, run_id) == before, "w0 wrote for a run it no longer holds"
    assert_once_and_held(workers, run_id, "b", holder)
    assert workers.owner(run_id) == (holder, True)


def lease_renewed_after(workers: Workers, run_id: str, token: int, moment: float) -> bool:
    """w0 still holds the claim with ``token`` and renewed it after ``moment`` (database
    clock): a renewal before it cannot reach past ``moment + LEASE_SECONDS``."""
    worker, held, expires_at = workers.lease_end(run_id)
    assert (worker, held) == ("w0", token), "nobody may take a run whose lease is renewed"
    return expires_at > moment + LEASE_SECONDS


def test_c_sessions_terminated_mid_call_the_worker_reconnects_or_is_fenced(workers):
    run_id = start_shell_call(workers, "c")
    _, token, _ = workers.lease_end(run_id)
    # 1. w0's journal sessions are terminated once (its liveness lock's session lives on):
    #    it renews on new sessions within its lease and keeps the run; a lost journal
    #    session alone authorises nothing (no takeover, no new effect)
    killed = workers.terminate_backends(0, liveness=False)
    assert killed, "w0 has sessions to terminate"
    moment = workers.db_now()
    wait_for(
        lambda: lease_renewed_after(workers, run_id, token, moment),
        LEASE_SECONDS * 3,
        "w0 to renew its claim on a new session",
    )
    assert set(workers.backends(0)).isdisjoint(killed)
    assert [w for w, _ in workers.claim_history(run_id)] == ["w0"]
    # 2. w0's sessions are all terminated, its liveness lock's too, and its logins refused:
    #    taken for dead, the run is taken over (without waiting for the lease); the guess
    #    is safe, w0's late write is refused
    workers.set_login(0, False)
    try:
        # terminated until none is left (one authenticated just before NOLOGIN goes too)
        wait_for(lambda: not workers.terminate_backends(0), 10, "w0's sessions to end")
        holder = taken_over(workers, run_id, "w0")
        before = journal_state(workers, run_id)
        expected = refused_write(workers, run_id)
    finally:
        workers.set_login(0, True)
    workers.gate.touch()  # the shell on w0 ends: w0 has a result to commit, on new sessions
    wait_for(lambda: shell_finished(workers, 0), 60, "the shell on w0 to finish")
    wait_for_refusal(workers, expected)
    wait_for(lambda: workers.settled(0), 60, "w0's writes to settle")
    assert_write_found_out(workers, run_id)
    assert journal_state(workers, run_id) == before, "w0 wrote for a run it no longer holds"
    assert_once_and_held(workers, run_id, "c", holder)
    assert workers.owner(run_id) == (holder, True)
