"""SIGKILL a process that journals as fast as it can, hundreds of times, at random moments.

After every kill the journal must open, pass integrity_check, and hold every commit the
child acknowledged (it prints an ack line only after the journal call returned), intact.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from durability import Journal, canonical_json, digest, fingerprint
from durability.checkpoints import load_checkpoint
from durability.store.rows import CheckpointRow
from durability.store.sqlite_tx import SqliteTx

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHILD = Path(__file__).with_name("_crash_child.py")
REPO = Path(__file__).resolve().parents[2]
KILLS = 200
FRESH_PROCESS_KILLS = 10  # of which this many exec a brand-new interpreter (no fork server)
DEADLINE_S = 20.0


class Lines:
    """Reads whole lines from a pipe, waiting on a condition with a deadline."""

    def __init__(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.fd = proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.eof = False

    def next(self, deadline: float) -> str | None:
        """The next line, or None at end of file; fails the test past the deadline."""
        while b"\n" not in self.buffer:
            if self.eof:
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no line from the child before the deadline: {self.buffer[-200:]!r}")
            if self.selector.select(timeout=remaining):
                chunk = os.read(self.fd, 65536)
                if chunk:
                    self.buffer += chunk
                else:
                    self.eof = True
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8")

    def close(self) -> None:
        self.selector.close()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    return env


class Checker:
    """Holds every acknowledged commit and checks it against the database."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.acks: list[dict[str, Any]] = []
        self.intents: dict[str, dict[str, Any]] = {}

    def after_kill(self, new_acks: list[dict[str, Any]]) -> None:
        with Journal.open_sqlite(self.db) as journal:  # it opens (quick check, migrations)
            assert journal.integrity_check(full=True) == []
        conn = sqlite3.connect(self.db, isolation_level=None)
        try:
            for record in new_acks:
                self.check(conn, record)
        finally:
            conn.close()
        self.acks.extend(new_acks)

    def check_all(self) -> None:
        conn = sqlite3.connect(self.db, isolation_level=None)
        try:
            for record in self.acks:
                self.check(conn, record)
        finally:
            conn.close()

    def check(self, conn: sqlite3.Connection, ack: dict[str, Any]) -> None:
        op = ack["op"]
        if op == "admit":
            row = conn.execute(
                "SELECT i.digest, i.context_id, i.run_id, r.input_id, r.input_digest"
                " FROM inputs i JOIN runs r ON r.id = i.run_id WHERE i.input_id = ?",
                (ack["input_id"],),
            ).fetchone()
            assert row == (
                ack["digest"],
                ack["context_id"],
                ack["run_id"],
                ack["input_id"],
                ack["digest"],
            ), ack
        elif op == "intent":
            self.intents[ack["call_id"]] = ack
            row = conn.execute(
                "SELECT run_id, seq, kind, name, args, policy, fingerprint FROM calls WHERE id = ?",
                (ack["call_id"],),
            ).fetchone()
            assert row is not None, f"acknowledged intent lost: {ack}"
            expected_fp = fingerprint(ack["kind"], "noop", ack["args"], "never")
            assert row == (
                ack["run_id"],
                ack["seq"],
                ack["kind"],
                "noop",
                canonical_json(ack["args"]),
                "never",
                expected_fp,
            ), ack
        elif op == "result":
            row = conn.execute(
                "SELECT state, result, result_digest FROM calls WHERE id = ?", (ack["call_id"],)
            ).fetchone()
            assert row == ("completed", canonical_json(ack["result"]), digest(ack["result"])), ack
        elif op == "checkpoint":
            row = conn.execute(
                "SELECT id, run_id, context_id, seq, body, digest, created_at FROM checkpoints"
                " WHERE id = ?",
                (ack["id"],),
            ).fetchone()
            assert row is not None, f"acknowledged checkpoint lost: {ack}"
            checkpoint = load_checkpoint(SqliteTx(conn), CheckpointRow(*row))  # checks digests
            assert checkpoint.run_id == ack["run_id"] and checkpoint.digest == ack["digest"]
            history = checkpoint.histories["0"]
            assert len(history) == ack["length"] and history[-1] == ack["last"], ack
        elif op == "end":
            status = conn.execute("SELECT status FROM runs WHERE id = ?", (ack["run_id"],))
            assert status.fetchone() == (ack["status"],), ack
        else:
            raise AssertionError(f"unknown ack {ack}")


def _life(lines: Lines, kill_after: int, deadline: float) -> tuple[int, list[dict[str, Any]]]:
    """Read the child's pid and acks; SIGKILL it once `kill_after` acks arrived."""
    first = lines.next(deadline)
    assert first is not None and first.startswith("pid "), first
    pid = int(first.split()[1])
    acks: list[dict[str, Any]] = []
    if kill_after < 0:  # kill while it is still opening the journal
        os.kill(pid, signal.SIGKILL)
        return pid, acks
    while len(acks) < kill_after:
        line = lines.next(deadline)
        assert line is not None, "the child ended on its own"
        if line != "opened":
            acks.append(json.loads(line))
    os.kill(pid, signal.SIGKILL)
    return pid, acks


def _drain(lines: Lines, acks: list[dict[str, Any]], until: str | None, deadline: float) -> str:
    """Collect acks that were written before the kill, up to `until` (or end of file)."""
    while True:
        line = lines.next(deadline)
        if line is None:
            return ""
        if until is not None and line.startswith(until):
            return line
        if line not in ("opened",) and line.startswith("{"):
            acks.append(json.loads(line))


def _kill_after(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.08:
        return -1  # during open / migration
    if roll < 0.2:
        return 0  # right after the journal opened
    return rng.randint(1, 25)


def test_acknowledged_commits_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "durability" / "journal.sqlite"
    seed = int(os.environ.get("A0_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    checker = Checker(db)
    started = time.monotonic()
    server = subprocess.Popen(
        [sys.executable, str(CHILD), "--serve", str(db)],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    lines = Lines(server)
    assert server.stdin is not None
    kills = 0
    try:
        assert lines.next(time.monotonic() + DEADLINE_S) == "ready"
        for life in range(KILLS - FRESH_PROCESS_KILLS):
            deadline = time.monotonic() + DEADLINE_S
            server.stdin.write(f"life {seed}{life:04d}\n".encode())
            server.stdin.flush()
            pid, acks = _life(lines, _kill_after(rng), deadline)
            reaped = _drain(lines, acks, f"reaped {pid} ", deadline)
            status = int(reaped.split()[2])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, reaped
            kills += 1
            checker.after_kill(acks)
        for life in range(FRESH_PROCESS_KILLS):
            deadline = time.monotonic() + DEADLINE_S
            child = subprocess.Popen(
                [sys.executable, str(CHILD), "--once", str(db), f"{seed}9{life:03d}"],
                env=_env(),
                stdout=subprocess.PIPE,
            )
            fresh = Lines(child)
            try:
                _, acks = _life(fresh, _kill_after(rng), deadline)
                _drain(fresh, acks, None, deadline)
                assert child.wait(timeout=DEADLINE_S) == -signal.SIGKILL
            finally:
                fresh.close()
                assert child.stdout is not None
                child.stdout.close()
            kills += 1
            checker.after_kill(acks)
    finally:
        server.stdin.close()
        server.wait(timeout=DEADLINE_S)
        lines.close()
        assert server.stdout is not None
        server.stdout.close()
    checker.check_all()
    elapsed = time.monotonic() - started
    assert kills == KILLS
    assert len(checker.acks) > KILLS * 5, "the child acknowledged too little to mean anything"
    ops = {a["op"] for a in checker.acks}
    assert ops == {"admit", "intent", "result", "checkpoint", "end"}, (seed, ops)
    print(f"crash seed {seed}: {kills} kills, {len(checker.acks)} acks, {elapsed:.1f}s")
