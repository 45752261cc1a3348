"""Two workers sweep for expired runs while PostgreSQL stops (immediate) for ~2 seconds:
the sweeps fail during the outage, resume after it, and no run is claimed twice."""

from __future__ import annotations

import os
import threading
import time

import pytest

from durability import DurabilityError, Journal
from tests.postgres.conftest import sha, wait_for
from tests.support.postgres import PostgresUnavailable, start_cluster, wait_until_accepting

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

OUTAGE_SECONDS = 2.0


@pytest.fixture
def own_server():
    """A cluster of this test's own: the test stops it, so it cannot be the shared one."""
    try:
        server = start_cluster()
    except PostgresUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL binaries are required in CI: {exc}")
        pytest.skip(str(exc))
    yield server
    server.destroy()


class Sweeper(threading.Thread):
    def __init__(self, journal: Journal, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.journal = journal
        self.stop = stop
        self.claimed: list[str] = []
        self.failures = 0
        self.sweeps_after_failure = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                won = self.journal.cluster.sweep(limit=2)
            except DurabilityError:
                self.failures += 1
            else:
                self.claimed += [c.run_id for c in won]
                if self.failures:
                    self.sweeps_after_failure += 1
            self.stop.wait(0.05)  # the sweep interval


def test_sweeps_survive_an_outage_and_claim_each_run_once(own_server):
    def open_journal(worker, lease):
        return Journal.open_postgres(
            own_server.dsn,
            namespace="shared",
            worker_id=worker,
            lease_seconds=lease,
            pool_size=2,
            connect_timeout=1,
        )

    early = open_journal("dead-early", 0.3)
    late = open_journal("dead-late", 8.0)  # expires after the outage
    runs = [early.admit(f"e{i}", f"in-e{i}", sha(f"e{i}")).run.id for i in range(3)]
    runs += [late.admit(f"l{i}", f"in-l{i}", sha(f"l{i}")).run.id for i in range(3)]
    early.close()  # both die without releasing anything
    late.close()
    stop = threading.Event()
    sweepers = [Sweeper(open_journal(w, 30.0), stop) for w in ("sweeper-a", "sweeper-b")]
    try:
        for s in sweepers:
            s.start()

        def claimed() -> list[str]:
            return [r for s in sweepers for r in s.claimed]

        wait_for(lambda: len(claimed()) >= 3, what="the expired runs to be swept")
        assert len(claimed()) < 6, "the late runs must still be held when PostgreSQL stops"
        own_server.stop("immediate")
        time.sleep(OUTAGE_SECONDS)  # the outage itself, not a wait for anything
        own_server.start()
        wait_until_accepting(own_server)
        wait_for(lambda: len(claimed()) >= 6, timeout=60, what="every run to be swept")
        stop.set()
        for s in sweepers:
            s.join(timeout=30)
        assert sorted(claimed()) == sorted(runs), "a run was claimed twice or never"
        assert sum(s.failures for s in sweepers) > 0, "the outage should have failed sweeps"
        assert sum(s.sweeps_after_failure for s in sweepers) > 0
        checker = sweepers[0].journal
        for s in sweepers:
            for run_id in s.claimed:
                owner = checker.cluster.owner(run_id)
                assert owner.worker_id == s.journal.cluster.worker_id and owner.live
                events = [
                    e.payload for e in checker.list_events(run_id=run_id) if e.type == "claim"
                ]
                assert [e["worker_id"] for e in events][1:] == [s.journal.cluster.worker_id]
    finally:
        stop.set()
        for s in sweepers:
            s.join(timeout=30)
            s.journal.close()
