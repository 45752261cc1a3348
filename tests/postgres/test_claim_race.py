"""Two workers claim the same expired run at the same instant, 100 times: one wins each time."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from durability import FencingLost
from tests.postgres.conftest import sha, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROUNDS = 100


def test_one_winner_per_expired_run_every_time(open_journal):
    # the first holder's lease is so short that every run is expired when the race starts
    dying = open_journal("dying", lease_seconds=0.001)
    workers = [open_journal("a"), open_journal("b")]
    barrier = threading.Barrier(2)

    def contend(worker, run_id, use_sweep):
        barrier.wait(timeout=30)
        if use_sweep:
            return worker.cluster.sweep(limit=1)
        claim = worker.cluster.claim(run_id)
        return [] if claim is None else [claim]

    wins = {"a": 0, "b": 0}
    with ThreadPoolExecutor(2) as pool:
        for i in range(ROUNDS):
            run = dying.admit(f"chat-{i}", f"in-{i}", sha(str(i))).run
            expired = dying.cluster.get(run.id)
            wait_for(lambda run=run: not dying.cluster.owner(run.id).live, what="expiry")
            use_sweep = i % 2 == 1  # half the rounds race direct claims, half race sweeps
            futures = [pool.submit(contend, w, run.id, use_sweep) for w in workers]
            results = [f.result(timeout=60) for f in futures]
            won = [
                (w.cluster.worker_id, c) for w, r in zip(workers, results, strict=True) for c in r
            ]
            assert len(won) == 1, f"round {i}: {won}"
            winner, claim = won[0]
            assert claim.run_id == run.id and claim.token > expired.token
            owner = workers[0].cluster.owner(run.id)
            assert (owner.worker_id, owner.token) == (winner, claim.token)
            loser = workers[1] if winner == "a" else workers[0]
            assert loser.cluster.get(run.id) is None
            with pytest.raises(FencingLost):
                loser.set_run_status(run.id, "failed")
            wins[winner] += 1
    assert sum(wins.values()) == ROUNDS
