"""A journal full of finished chats, written through the journal API (no model, no loop).

Each chat has one finished run of ``steps`` journaled calls (model and tool calls in
turn); after every call a checkpoint in the shape the agent loop writes (see
python/durable/checkpoint.py: ``current`` and ``resume`` projections, the agent's
flattened history and the chat log), with one ~200-byte message more per step. The
server rebuilds every chat from these checkpoints at start-up, as it would after a
restart with real chats.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import _common

SEED_THREADS = 8  # concurrent chats while seeding: the group-commit writer batches them


def _state(step: int) -> dict[str, Any]:
    agent = {
        "number": 0,
        "profile": "agent0",
        "history": {"counter": step + 2, "max_tokens": 0},
        "loop": {"iteration": step // 2, "last_response": ""},
        "data": {},
    }
    return {
        "v": 1,
        "agents": [agent],
        "seq": {"0": step + 1},
        "start_agent": 0,
        "streaming_agent": None,
    }


def _log_item(no: int, kind: str, heading: str, content: str) -> dict[str, Any]:
    return {
        "no": no,
        "id": f"log-{no}",
        "type": kind,
        "heading": heading,
        "content": content,
        "kvps": {},
        "agentno": 0,
        "timestamp": time.time(),
    }


def seed_chat(journal: Any, chat: int, steps: int) -> None:
    from durability import CheckpointData

    context_id = f"seed-chat-{chat:04d}"
    task = f"seeded task {chat}: {_common.MESSAGE}"
    digest = hashlib.sha256(task.encode()).hexdigest()
    run = journal.admit(context_id, f"seed-input-{chat}", digest, message={"text": task}).run
    history = [
        journal.freeze({"current": ""}),
        journal.freeze({"m": {"id": 1, "ai": False, "content": task}}),
    ]
    log = [_log_item(0, "user", "User message", task)]
    for step in range(steps):
        model_step = step % 2 == 0
        kind, name = ("model", "model") if model_step else ("tool", "code_execution_tool")
        args: dict[str, Any] = (
            {"provider": "other", "model": "scripted", "kind": "chat", "messages_digest": digest}
            if model_step
            else {"runtime": "terminal", "session": 0, "code": f"echo step {step}"}
        )
        policy = "hold" if model_step else "adapter:shell"
        call = journal.record_intent(
            run.id, agent_no=0, seq=step, kind=kind, name=name, args=args, policy=policy
        )
        content = f"{step}:{_common.MESSAGE}"
        history.append(
            journal.freeze({"m": {"id": step + 2, "ai": model_step, "content": content}})
        )
        log.append(_log_item(step + 1, "agent" if model_step else "code_exe", name, content))
        state = _state(step)
        data = CheckpointData(
            {"current": state, "resume": state},
            {
                "agent:0": list(history),
                "log": list(log),
                "resume:agent:0": list(history),
                "resume:log": list(log),
            },
            seq=step,
        )
        journal.commit_result(call.id, {"content": content}, checkpoint=data)
    journal.set_run_status(run.id, "completed")


def seed_long_chat(journal: Any, context_id: str, items: int, messages: int = 200) -> None:
    """One finished chat whose log holds ``items`` items (and agent 0 ``messages`` history
    messages), written as one run of two steps: the UI's long chat (bench/poll_bench.py)."""
    from durability import CheckpointData

    task = f"a long chat: {_common.MESSAGE}"
    digest = hashlib.sha256(task.encode()).hexdigest()
    run = journal.admit(context_id, f"{context_id}-input", digest, message={"text": task}).run
    history = [journal.freeze({"current": ""})]
    for n in range(messages):
        body = {"id": n + 1, "ai": n % 2 == 1, "content": f"{n}:{_common.MESSAGE}"}
        history.append(journal.freeze({"m": body}))
    kinds = ("user", "agent", "tool", "code_exe", "response", "info")
    log = [
        _log_item(no, kinds[no % len(kinds)], f"heading {no}", f"{no}:{_common.MESSAGE}")
        for no in range(items)
    ]
    for step in range(2):
        args = {"provider": "other", "model": "scripted", "kind": "chat", "messages_digest": digest}
        call = journal.record_intent(
            run.id, agent_no=0, seq=step, kind="model", name="model", args=args, policy="hold"
        )
        state = _state(step)
        data = CheckpointData(
            {"current": state, "resume": state},
            {"agent:0": history, "log": log, "resume:agent:0": history, "resume:log": log},
            seq=step,
        )
        journal.commit_result(call.id, {"content": "answer"}, checkpoint=data)
    journal.set_run_status(run.id, "completed")


def seed_journal(
    path: Path, chats: int, steps: int, extra: Callable[[Any], None] | None = None
) -> float:
    """Write ``chats`` finished chats of ``steps`` steps to a new journal at ``path`` (and
    whatever ``extra(journal)`` writes). Seeds on a RAM disk when there is one, then copies
    the closed file. Returns seconds."""
    _common.use_repo()
    from durability import Journal

    started = time.monotonic()
    ram = Path("/dev/shm")
    scratch = Path(tempfile.mkdtemp(prefix="seed-", dir=ram if ram.is_dir() else path.parent))
    try:
        journal = Journal.open_sqlite(scratch / "journal.sqlite")
        try:
            with ThreadPoolExecutor(SEED_THREADS) as pool:
                list(pool.map(lambda chat: seed_chat(journal, chat, steps), range(chats)))
            if extra is not None:
                extra(journal)
        finally:
            journal.close()  # the last connection folds the WAL into the file
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        shutil.copyfile(scratch / "journal.sqlite", path)
        os.chmod(path, 0o600)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - started
