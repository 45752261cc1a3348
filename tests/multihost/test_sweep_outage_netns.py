"""(d) Two workers in network namespaces sweep for expired runs over their veth links while
PostgreSQL stops (immediate) for about two seconds: their sweeps fail during the outage and
resume after it, every run ends up claimed, and no run is claimed twice."""

from __future__ import annotations

import hashlib
import time

import pytest

from durability import DurabilityError, Journal
from tests.multihost.conftest import Claimer
from tests.support.netns import wait_for
from tests.support.postgres import wait_until_accepting

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.netns,
    pytest.mark.slow,
    pytest.mark.xdist_group("netns"),
]

OUTAGE_SECONDS = 2.0
SWEEPERS = ("sweeper-a", "sweeper-b")


def _owners(journal: Journal, runs: list[str]) -> dict[str, str] | None:
    """run -> the sweeper holding a live claim on it, once every run has one."""
    owners = {}
    try:
        for run_id in runs:
            owner = journal.cluster.owner(run_id)
            if owner is None or not owner.live or owner.worker_id not in SWEEPERS:
                return None
            owners[run_id] = owner.worker_id
    except DurabilityError:
        return None
    return owners


def test_sweeps_across_hosts_survive_an_outage(network, bridge_postgres, tmp_path):
    def journal(worker: str, lease: float, liveness: bool = True) -> Journal:
        return Journal.open_postgres(
            bridge_postgres.dsn,
            namespace="shared",
            worker_id=worker,
            lease_seconds=lease,
            pool_size=2,
            connect_timeout=2,
            liveness=liveness,
        )

    # late: expires after the outage. Its claims carry no liveness lock (as an older
    # worker's), so closing it leaves them to their lease (docs/shared-workers.md)
    early, late = journal("dead-early", 0.3), journal("dead-late", 8.0, liveness=False)
    digest = hashlib.sha256(b"x").hexdigest()
    runs = [early.admit(f"e{i}", f"in-e{i}", digest).run.id for i in range(3)]
    runs += [late.admit(f"l{i}", f"in-l{i}", digest).run.id for i in range(3)]
    early.close()  # both die without releasing anything
    late.close()
    dsn = bridge_postgres.dsn_at(network.host_address)
    sweepers = [Claimer(network.add_node(), dsn, w, "shared", 30.0, tmp_path) for w in SWEEPERS]
    lines: dict[str, list[dict]] = {w: [] for w in SWEEPERS}

    def collect_until(predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            for s in sweepers:
                lines[s.worker_id] += s.pending()
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {lines}")
            time.sleep(0.02)

    def claimed() -> list[str]:
        return [r for w in SWEEPERS for line in lines[w] for r, _ in line.get("claimed", [])]

    checker = None
    try:
        for s in sweepers:
            s.send({"op": "sweep_loop", "interval": 0.05, "limit": 2})
        collect_until(lambda: len(claimed()) >= 3, 30, "the expired runs to be swept")
        assert len(claimed()) == 3, "the late runs must still be held when PostgreSQL stops"
        bridge_postgres.stop("immediate")
        collect_until(
            lambda: all(any("failed" in x for x in lines[w]) for w in SWEEPERS),
            30,
            "both sweepers to see the outage",
        )
        time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for anything
        bridge_postgres.start()
        wait_until_accepting(bridge_postgres)
        checker = journal("checker", 30.0)
        owners = wait_for(lambda: _owners(checker, runs), 60, "every run to be swept")
        for s in sweepers:
            s.send("stop")
        collect_until(
            lambda: all(any("stopped" in x for x in lines[w]) for w in SWEEPERS), 30, "stop"
        )
        # no run claimed twice: each run has one sweeper's claim after its dead holder's
        for run_id in runs:
            events = [e.payload for e in checker.list_events(run_id=run_id) if e.type == "claim"]
            assert [e["worker_id"] for e in events][1:] == [owners[run_id]], run_id
        assert sorted(claimed()) == sorted(set(claimed())), "a sweeper won a run twice"
        for w in SWEEPERS:  # what a sweeper says it won, the database agrees it holds
            mine = [r for line in lines[w] for r, _ in line.get("claimed", [])]
            assert all(owners[r] == w for r in mine)
        # the sweeps resumed: some sweeper won runs after its failed sweeps
        resumed = [
            w
            for w in SWEEPERS
            for i, x in enumerate(lines[w])
            if "claimed" in x and any("failed" in y for y in lines[w][:i])
        ]
        assert resumed, f"no sweep won anything after the outage: {lines}"
    finally:
        for s in sweepers:
            s.close()
        if checker is not None:
            checker.close()
