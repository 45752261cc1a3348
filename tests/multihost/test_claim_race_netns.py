"""(e) Two workers on two hosts (network namespaces, PostgreSQL over veth links) claim the
same expired run at the same instant, 100 times: exactly one wins every time, and the
loser's fenced write is refused."""

from __future__ import annotations

import hashlib

import pytest

from durability import Journal
from tests.multihost.conftest import Claimer
from tests.support.netns import wait_for

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.xdist_group("netns"),
]

ROUNDS = 100


def test_one_winner_per_expired_run_across_hosts(network, bridge_postgres, tmp_path):
    # the admitting worker's lease is so short that each run is expired when the race starts
    dying = Journal.open_postgres(
        bridge_postgres.dsn, namespace="shared", worker_id="dying", lease_seconds=0.001
    )
    dsn = bridge_postgres.dsn_at(network.host_address)
    claimers = [
        Claimer(network.add_node(), dsn, name, "shared", 30.0, tmp_path) for name in ("a", "b")
    ]
    wins = {"a": 0, "b": 0}
    try:
        for i in range(ROUNDS):
            run = dying.admit(f"chat-{i}", f"in-{i}", hashlib.sha256(b"%d" % i).hexdigest()).run
            first = dying.cluster.get(run.id)
            wait_for(lambda run=run: not dying.cluster.owner(run.id).live, 10, "expiry")
            mode = "sweep" if i % 2 else "claim"  # half direct claims, half sweeps
            for c in claimers:
                c.send({"op": "arm", "mode": mode, "run_id": run.id})
            for c in claimers:
                c.expect("armed")
            for c in claimers:  # both are blocked reading this line: they start together
                c.send("go")
            results = {c.worker_id: c.expect("won")["won"] for c in claimers}
            won = [(w, tuple(claim)) for w, claims in results.items() for claim in claims]
            assert len(won) == 1, f"round {i} ({mode}): {results}"
            winner, (run_id, token) = won[0]
            assert run_id == run.id and token > first.token
            owner = dying.cluster.owner(run.id)
            assert (owner.worker_id, owner.token, owner.live) == (winner, token, True)
            loser = next(c for c in claimers if c.worker_id != winner)
            loser.send({"op": "status", "run_id": run.id, "status": "failed"})
            assert loser.read()["error"] == "fencing_lost", f"round {i}"
            holder = next(c for c in claimers if c.worker_id == winner)
            holder.send({"op": "status", "run_id": run.id, "status": "completed"})
            assert holder.read() == {"ok": True}, f"round {i}"
            claims = [e.payload for e in dying.list_events(run_id=run.id) if e.type == "claim"]
            assert [e["worker_id"] for e in claims] == ["dying", winner], f"round {i}"
            assert dying.get_run(run.id).status == "completed"
            wins[winner] += 1
    finally:
        for c in claimers:
            c.close()
        dying.close()
    assert sum(wins.values()) == ROUNDS
