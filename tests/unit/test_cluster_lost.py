"""A worker names the token of a claim it lost in a refusal, remembering a bounded number."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from durability import cluster as cluster_mod
from durability.cluster import Cluster
from durability.errors import FencingLost


class _Claims:
    """A claims table whose fence row says the run is at token 99."""

    def lock_fence(self, *, run_id: str | None, call_id: str | None) -> tuple[str, int]:
        return str(run_id), 99


class _Tx:
    """A transaction with that claims table."""

    claims = _Claims()


def _claim_and_lose(cluster: Cluster, run_id: str, token: int) -> None:
    row = SimpleNamespace(
        run_id=run_id,
        context_id="ctx",
        worker_id=cluster.worker_id,
        token=token,
        expires_at=0.0,
        previous_worker=None,
    )
    cluster._adopt(row, sent_at=0.0)
    cluster.lose(run_id, "test", quiet=True)


def _refusal(cluster: Cluster, run_id: str) -> FencingLost:
    with pytest.raises(FencingLost) as info:
        cluster.check_fence(_Tx(), run_id=run_id)
    return info.value


def test_lost_claims_are_remembered_newest_first_up_to_the_bound(monkeypatch):
    monkeypatch.setattr(cluster_mod, "LOST_KEPT", 3)
    cluster = Cluster(store=None, worker_id="w1")
    for n in range(5):
        _claim_and_lose(cluster, f"run-{n}", token=n + 1)

    assert _refusal(cluster, "run-4").fields["lost_token"] == 5
    assert _refusal(cluster, "run-2").fields["lost_token"] == 3
    oldest = _refusal(cluster, "run-0")
    assert oldest.fields["reason"] == "not_claimed" and "lost_token" not in oldest.fields


def test_a_run_lost_again_counts_as_the_newest(monkeypatch):
    monkeypatch.setattr(cluster_mod, "LOST_KEPT", 2)
    cluster = Cluster(store=None, worker_id="w1")
    _claim_and_lose(cluster, "a", token=1)
    _claim_and_lose(cluster, "b", token=2)
    _claim_and_lose(cluster, "a", token=3)  # taken back, lost again
    _claim_and_lose(cluster, "c", token=4)  # pushes out the oldest: b

    assert _refusal(cluster, "a").fields["lost_token"] == 3
    assert "lost_token" not in _refusal(cluster, "b").fields
