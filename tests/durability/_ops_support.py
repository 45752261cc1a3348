"""Builders shared by the operations tests (backup, retention, verify, CLI)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

from durability import Journal, canonical_json
from durability.canonical import digest_text
from durability.records import CheckpointData, Run

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


def _put_json(tx: Any, value: Any) -> str:
    text = canonical_json(value)
    tx.blobs.put(sha(text), text.encode("utf-8"), 1.0)
    return sha(text)


def old_format_checkpoint(
    journal: Journal, run: Run, histories: dict[str, list[Any]], heads: dict[str, Any]
) -> int:
    """A checkpoint as the code before issue #24 round 3 wrote it (format 1): each changed
    history a node blob based on the previous head, the body ``{"head", "length"}`` per
    key. ``heads`` maps each key to (head, messages) of the previous one; it is updated."""

    def write(tx: Any) -> int:
        refs = {}
        for key, messages in histories.items():
            hashes = [_put_json(tx, m) for m in messages]
            head, before = heads.get(key, (None, []))
            keep = 0
            while keep < min(len(before), len(messages)) and before[keep] == messages[keep]:
                keep += 1
            if key not in heads or not keep == len(before) == len(messages):
                base = head if keep else None
                node = {"base": base, "keep": keep if base else 0, "add": hashes[keep:]}
                head = _put_json(tx, node)
            heads[key] = (head, list(messages))
            refs[key] = {"head": head, "length": len(messages)}
        state = {"old": True}
        body = canonical_json(
            {"v": 1, "run_id": run.id, "seq": None, "state": state, "histories": refs}
        )
        return int(
            tx.checkpoints.insert(run.id, run.context_id, None, body, digest_text(body), 2.0)
        )

    return journal.store.write(write)
