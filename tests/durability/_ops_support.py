"""Builders shared by the operations tests (backup, retention, verify, CLI)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from durability import Journal
from durability.records import CheckpointData

DAY = 86_400.0


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def journaled_run(
    journal: Journal,
    context_id: str,
    input_id: str,
    *,
    steps: int = 3,
    status: str | None = "completed",
    history: list[dict] | None = None,
) -> tuple[str, list[dict]]:
    """Admit, journal `steps` tool calls with checkpoints, then end the run with `status`.

    `history` carries the chat's messages across runs (the checkpoint chain continues).
    Returns the run id and the history after the run.
    """
    messages = list(history or [])
    run = journal.admit(context_id, input_id, sha(input_id), message=f"msg {input_id}").run
    for seq in range(steps):
        call = journal.record_intent(
            run.id, agent_no=0, seq=seq, kind="tool", name="noop", args={"i": seq}, policy="never"
        )
        messages.append({"role": "assistant", "content": f"{input_id} step {seq}"})
        journal.commit_result(
            call.id,
            {"ok": seq},
            checkpoint=CheckpointData(
                state={"step": seq}, histories={"0": list(messages)}, seq=seq
            ),
        )
    if status is not None and status != "active":
        journal.set_run_status(run.id, status)
    return run.id, messages


def count(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def execute(db: Path, sql: str, args: tuple = ()) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute(sql, args)
    finally:
        conn.close()
