"""Fixtures of the multi-host tests: a bridge with network namespaces, a PostgreSQL cluster
of the test's own listening on the bridge, and bare workers inside the namespaces.

These tests need root and ``ip`` (iproute2) besides PostgreSQL: missing in CI (CI=true) is
a failure, elsewhere a skip. They all run in one xdist group ("netns").
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.netns import NetnsUnavailable, Network, Node, check_available, sweep_stale
from tests.support.postgres import PostgresServer, PostgresUnavailable, start_cluster

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the multi-host tests are required in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def netns_ready() -> bool:
    """Checked once per test process; removes namespaces that dead test processes left."""
    try:
        check_available()
    except NetnsUnavailable as exc:
        _missing(str(exc))
    sweep_stale()
    return True


@pytest.fixture
def network(netns_ready: bool) -> Iterator[Network]:
    """A bridge of the test's own; its namespaces, links and processes go afterwards."""
    with Network() as net:
        yield net
    assert net.leftovers() == [], "the network was not removed"


@pytest.fixture
def bridge_postgres(network: Network) -> Iterator[PostgresServer]:
    """A PostgreSQL cluster of the test's own (tests stop and restart it), listening on
    127.0.0.1 and the bridge address."""
    try:
        server = start_cluster(extra_addresses=[network.host_address])
    except PostgresUnavailable as exc:
        _missing(str(exc))
    try:
        yield server
    finally:
        server.destroy()


class Claimer:
    """A bare worker (tests/multihost/_claimer.py) inside a namespace, line by line."""

    def __init__(
        self, node: Node, dsn: str, worker_id: str, schema: str, lease: float, log_dir: Path
    ) -> None:
        self.node = node
        self.worker_id = worker_id
        self.log_path = log_dir / f"{worker_id}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("A0_")}
        env.update({"A0_TEST_DSN": dsn, "PYTHONUNBUFFERED": "1"})
        python = str(PYTHON if PYTHON.exists() else Path(sys.executable))
        with self.log_path.open("wb") as log:
            self.process = node.popen(
                [python, "-m", "tests.multihost._claimer", worker_id, schema, str(lease)],
                env=env,
                cwd=REPO,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self._lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.expect("ready", timeout=60)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.put(json.loads(raw))
        self._lines.put(None)

    def send(self, obj: object) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write((obj if isinstance(obj, str) else json.dumps(obj)).encode())
        self.process.stdin.write(b"\n")
        self.process.stdin.flush()

    def read(self, timeout: float = 30) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self.worker_id}: no answer within {timeout}s") from None
        if line is None:
            self.process.wait(10)
            log = self.log_path.read_text(errors="replace")[-3000:]
            raise AssertionError(f"{self.worker_id} exited ({self.process.returncode}): {log}")
        return line

    def pending(self) -> list[dict[str, Any]]:
        """The lines answered so far and not read yet (does not wait)."""
        found = []
        while not self._lines.empty():
            found.append(self.read(1))
        return found

    def expect(self, key: str, timeout: float = 30) -> dict[str, Any]:
        line = self.read(timeout)
        assert key in line, f"{self.worker_id}: expected {key!r}, got {line}"
        return line

    def close(self) -> None:
        if self.process.poll() is None:
            self.send({"op": "quit"})
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
