"""The server's journal: open it at start-up, rebuild and recover chats, admit messages.

run_ui.py builds ``Runtime(..., durable=True)``; ``Runtime.start`` then calls
:func:`start`. Unit tests that build a bare ``Runtime`` keep the journal off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import string
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from durability.paths import journal_path, receipts_dir
from durability.retention import DEFAULT_RETENTION_DAYS, DEFAULT_RETENTION_RUNS

if TYPE_CHECKING:  # pragma: no cover
    from python.durable.runtime import Runtime

logger = logging.getLogger("a0.journal")


@dataclass
class Admitted:
    """What the server did with a message (see durable_admission.Submission)."""

    kind: str  # started | duplicate | intervention
    run_id: str | None
    input_id: str
    status: str
    task: asyncio.Task | None = None
    response: str | None = None
    context_id: str = ""  # the chat the run belongs to (a duplicate may name another)


class KeyedLocks:
    """One asyncio lock per key (an input id), dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def new_context_id() -> str:
    """A fresh chat id in the loop's format (8 letters and digits)."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def _retention_limits(settings: dict[str, Any]) -> tuple[int, float]:
    def number(key: str, default: float) -> float:
        value = settings.get(key, default)
        try:
            return float(value)
        except (TypeError, ValueError):
            return default

    runs = number("retention_runs", DEFAULT_RETENTION_RUNS)
    return int(runs), number("retention_days", DEFAULT_RETENTION_DAYS)


def apply_retention(runtime: Runtime) -> None:
    """Forget old finished runs (settings retention_runs / retention_days); never fatal."""
    from durability.retention import apply_retention as sweep

    path = journal_path(runtime.usr)
    if not path.exists():
        return
    keep_runs, keep_days = _retention_limits(runtime.settings)
    try:
        report = sweep(path, keep_runs=keep_runs, keep_days=keep_days)
        logger.info("retention: %d finished runs removed", report.runs_removed)
    except Exception as exc:  # a bad setting must not stop the server
        logger.warning("retention skipped: %s", getattr(exc, "code", type(exc).__name__))


def attach(runtime: Runtime, ctx: Any) -> Any:
    """Give a chat the server's journal and shell receipts."""
    ctx.journal = runtime.journal
    if runtime.receipts is not None:
        ctx.receipts = runtime.receipts
    return ctx


async def start(runtime: Runtime) -> list[Any]:
    """Open the journal, rebuild every chat, recover open runs; returns the recovery plans."""
    from durability import Journal
    from durability.adapters.shell import ShellReceipts
    from python.durable import resume as durable_resume
    from python.helpers import secrets

    await asyncio.to_thread(apply_retention, runtime)
    masker = secrets.masker_for(runtime.usr)
    journal = await asyncio.to_thread(Journal.open_sqlite, journal_path(runtime.usr), masker=masker)
    runtime.journal = journal
    runtime.receipts = ShellReceipts(receipts_dir(runtime.usr))
    contexts = await asyncio.to_thread(
        durable_resume.restore_contexts, journal, runtime.agent_config
    )
    for ctx in contexts:
        attach(runtime, ctx)
        runtime.journaled_chats.add(ctx.id)
    adapters = {"adapter:shell": runtime.receipts.classify}
    try:  # each run is held on its own failure; this guards what all runs share
        plans = await durable_resume.recover(journal, adapters=adapters)
    except Exception as exc:
        logger.warning("recovery did not run: %s", getattr(exc, "code", type(exc).__name__))
        plans = []
    for ctx in contexts:
        task = getattr(ctx, "task", None)
        if isinstance(task, asyncio.Task) and not task.done():
            runtime.track_task(ctx.id, task)
    try:
        pruned = await asyncio.to_thread(runtime.receipts.prune, _receipt_needed(journal))
    except Exception as exc:
        logger.warning("receipts not pruned: %s", type(exc).__name__)
        pruned = 0
    if pruned:
        logger.info("receipts: %d finished calls' receipts removed", pruned)
    held = [p for p in plans if p.action in ("hold", "skip")]
    logger.info(
        "journal open: %d chats, %d runs recovered, %d held",
        len(contexts),
        len(plans) - len(held),
        len(held),
    )
    return plans


def _receipt_needed(journal: Any) -> Any:
    """A receipt is kept while its call's run is still open (active or held)."""
    from durability.errors import DurabilityError

    def needed(call_id: str) -> bool:
        try:
            call = journal.get_call(call_id)
            return journal.get_run(call.run_id).status in ("active", "needs_attention")
        except DurabilityError:  # the call or its run is gone (retention)
            return False

    return needed


def close(runtime: Runtime) -> None:
    journal, runtime.journal = runtime.journal, None
    if journal is not None:
        with contextlib.suppress(Exception):
            journal.close()


async def admit(
    runtime: Runtime, ctx_id: str, message: Any, *, follow_input: bool = False
) -> tuple[Any | None, Admitted]:
    """Admit a message through the journal; returns (its chat, what happened).

    ``ctx_id`` names the chat (404 when unknown); without it, ``follow_input`` looks the
    input id up first (a retry whose first answer was lost goes back to its chat), else a
    new chat is opened, and it exists only once the journal took the input. Copies of one
    input admitted at the same moment are serialised here by input id, and the journal's
    admit decides between processes: every copy gets the first one's run. The chat is
    None when a duplicate's run belongs to a chat not loaded here. InputConflict, RunHeld,
    ... propagate and leave nothing behind."""
    from python.durable import admission as durable_admission

    if not message.id:
        message.id = uuid.uuid4().hex
    async with runtime.input_locks.hold(message.id):
        ctx = None
        if ctx_id:
            ctx = await runtime.chat(ctx_id)
        elif follow_input:
            known = await runtime.journal.aio.input_context(message.id)
            ctx = runtime.find_context(known) if known else None
        if ctx is not None:
            if ctx.journal is None:
                attach(runtime, ctx)
            runtime.admitting[ctx.id] += 1  # not dropped as purged while it takes a message
            try:
                sub = await durable_admission.submit(ctx, message)
            finally:
                runtime.admitting[ctx.id] -= 1
                if runtime.admitting[ctx.id] <= 0:
                    del runtime.admitting[ctx.id]
        else:
            sub = await durable_admission.submit_new_chat(
                runtime.journal, new_context_id(), message, runtime.create_context
            )
        chat = runtime.find_context(sub.context_id)
        if chat is not None:
            if sub.task is not None:
                runtime.track_task(chat.id, sub.task)
            if sub.kind == "started":
                runtime.journaled_chats.add(chat.id)
        admitted = Admitted(
            sub.kind, sub.run_id, sub.input_id, sub.status, sub.task, sub.response, sub.context_id
        )
        return chat, admitted


async def outcome(runtime: Runtime, admitted: Admitted, answer: str | None) -> tuple[str, Any]:
    """(run status, response) after the run's task ended: a held run has no response."""
    from python.durable import admission as durable_admission

    journal = runtime.journal
    if journal is None or admitted.run_id is None:
        return "completed", answer
    run = await journal.aio.get_run(admitted.run_id)
    if run.status in ("needs_attention", "active", "stopped"):
        return run.status, None
    if answer is None or admitted.kind == "duplicate":
        answer = await asyncio.to_thread(
            durable_admission.recorded_response, journal, admitted.run_id
        )
    return run.status, answer
