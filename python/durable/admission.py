"""Admission: every message to a journaled chat gets an input id and a content digest.

Same id and digest: the recorded run (and its answer) comes back and nothing starts.
Same id, other content: InputConflict. A held chat refuses with RunHeld. A message while
the chat's run is working becomes a journaled intervention on that run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durability.canonical import digest, digest_bytes
from durability.errors import DurabilityError
from python.durable.seams import run_admitted

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext, UserMessage
    from durability import Journal
    from durability.records import Admission, Run

logger = logging.getLogger("a0.durable")
_background: set[asyncio.Task] = set()  # journal writes in flight (kept referenced)


async def flush_background() -> None:
    """Wait for the journal writes started in the background (before closing the journal)."""
    while _background:
        await asyncio.gather(*list(_background), return_exceptions=True)


def _in_background(coro: Any) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


@dataclass
class Submission:
    """What happened to a submitted message."""

    kind: str  # started | duplicate | intervention
    run_id: str
    input_id: str
    status: str
    task: asyncio.Task | None = None
    response: str | None = None
    context_id: str = ""  # the chat the run belongs to (a duplicate may name another)


def _file_digest(path: str) -> str | None:
    try:
        return digest_bytes(Path(path).read_bytes())
    except OSError:
        return None


def input_payload(msg: UserMessage) -> dict[str, Any]:
    """What identifies a message's content: text, attachments (name + digest), system text."""
    return {
        "message": msg.message,
        "attachments": [{"name": Path(a).name, "digest": _file_digest(a)} for a in msg.attachments],
        "system_message": list(msg.system_message),
    }


def input_digest(journal: Journal, payload: dict[str, Any]) -> str:
    """SHA-256 of the masked canonical JSON of the payload."""
    return digest(journal.masker.mask(payload))


def _ensure_input_id(msg: UserMessage) -> str:
    if not msg.id:
        msg.id = uuid.uuid4().hex
    return msg.id


def recorded_response(journal: Journal, run_id: str) -> str | None:
    """The final answer journaled for a run, if it ended with one."""
    events = journal.list_events(run_id=run_id, limit=100_000)
    for event in reversed(events):
        if event.type == "run_result" and isinstance(event.payload, dict):
            response = event.payload.get("response")
            return response if isinstance(response, str) else None
    return None


async def run_outcome(journal: Journal, run_id: str) -> dict[str, Any]:
    """``{run_id, status, response}`` for a client (api_message): ``response`` is None until
    the run ends with an answer (a held run has none)."""
    run = await journal.aio.get_run(run_id)
    response = None
    if run.status in ("completed", "failed"):
        response = await asyncio.to_thread(recorded_response, journal, run_id)
    return {"run_id": run_id, "status": run.status, "response": response}


def _locks(context: AgentContext) -> asyncio.Lock:
    lock = context.data.get("_durable_admit_lock")
    if lock is None:
        lock = context.data["_durable_admit_lock"] = asyncio.Lock()
    return lock


def admitting(context: AgentContext) -> bool:
    """True while a message to this chat is being admitted."""
    lock = context.data.get("_durable_admit_lock")
    return lock is not None and lock.locked()


async def _content(journal: Journal, msg: UserMessage) -> tuple[str, dict[str, Any], str]:
    input_id = _ensure_input_id(msg)
    payload = await asyncio.to_thread(input_payload, msg)
    return input_id, payload, input_digest(journal, payload)


async def _duplicate(journal: Journal, adm: Admission, input_id: str) -> Submission:
    """The recorded run of an input seen before: its answer when it ended, else the task of
    its chat (loaded in this process and working) to wait on. The chat may be another one
    than the caller named: a racing copy of the request got there first."""
    from agent import AgentContext

    run = adm.run
    task = None
    response = None
    if run.status == "active":
        owner = AgentContext.get(run.context_id)
        if owner is not None and owner.is_running():
            task = owner.task  # one open run per chat: the working task is this run's
    elif run.status in ("completed", "failed"):
        response = await asyncio.to_thread(recorded_response, journal, run.id)
    return Submission("duplicate", run.id, input_id, run.status, task, response, run.context_id)


async def submit(context: AgentContext, msg: UserMessage) -> Submission:
    """Admit a message through the journal and act on it (the server's entry point).

    Raises InputConflict (same id, other content), RunHeld (the chat waits for a
    decision) and ActiveRunExists (a run is open but not running in this process)."""
    journal = context.journal
    input_id, payload, content_digest = await _content(journal, msg)
    async with _locks(context):
        context.paused = False
        if context.is_running():
            adm = await journal.aio.admit_intervention(
                context.id, input_id, content_digest, message=payload
            )
            if not adm.created:
                return await _duplicate(journal, adm, input_id)
            context.get_agent().intervention = msg
            return Submission(
                "intervention", adm.run.id, input_id, adm.run.status, context.task, None, context.id
            )
        adm = await journal.aio.admit(context.id, input_id, content_digest, message=payload)
        if not adm.created:
            return await _duplicate(journal, adm, input_id)
        return _start(context, adm.run, msg)


async def submit_new_chat(
    journal: Journal, context_id: str, msg: UserMessage, create: Callable[[str], AgentContext]
) -> Submission:
    """Admit a message that opens a new chat; the chat exists only once its input is admitted.

    ``create(context_id)`` builds the chat (registered, journal attached) after the journal
    took the input. A copy of an input already admitted (a racing retry, which generated
    another chat id) creates nothing: it gets the recorded run, in the chat it went to."""
    input_id, payload, content_digest = await _content(journal, msg)
    adm = await journal.aio.admit(context_id, input_id, content_digest, message=payload)
    if not adm.created:
        return await _duplicate(journal, adm, input_id)
    try:
        context = create(context_id)
    except BaseException:  # no chat to run it in: the input was not taken after all
        await asyncio.shield(asyncio.to_thread(_withdraw, journal, adm.run.id))
        raise
    return _start(context, adm.run, msg)


def _withdraw(journal: Journal, run_id: str) -> None:
    """Remove a run admitted a moment ago that never started (and its input id with it)."""
    try:
        journal.set_run_status(run_id, "failed", reason="chat_not_created")
        journal.delete_run(run_id)
    except DurabilityError as exc:
        logger.warning("run %s could not be withdrawn: %s", run_id, exc.code)


def _start(context: AgentContext, run: Run, msg: UserMessage) -> Submission:
    context.task = asyncio.get_running_loop().create_task(
        run_admitted(context, context.agent0, run, msg), name=f"chat-{context.id}"
    )
    return Submission("started", run.id, run.input_id, "active", context.task, None, context.id)


def start_new_input(
    context: AgentContext, agent: Agent, msg: UserMessage, after: asyncio.Task | None = None
) -> asyncio.Task:
    """``communicate`` with a journal: a task that admits ``msg`` and runs it."""

    async def admit_and_run() -> str:
        if after is not None and not after.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait([after])
        journal = context.journal
        input_id = _ensure_input_id(msg)
        payload = await asyncio.to_thread(input_payload, msg)
        adm = await journal.aio.admit(
            context.id, input_id, input_digest(journal, payload), message=payload
        )
        if not adm.created:
            return await asyncio.to_thread(recorded_response, journal, adm.run.id) or ""
        return await run_admitted(context, agent, adm.run, msg)

    return asyncio.get_running_loop().create_task(admit_and_run(), name=f"chat-{context.id}")


def journal_intervention_later(context: AgentContext, msg: UserMessage) -> None:
    """Journal an intervention handed over synchronously (``communicate``)."""
    journal = context.journal
    input_id = _ensure_input_id(msg)

    async def admit() -> None:
        try:
            payload = await asyncio.to_thread(input_payload, msg)
            await journal.aio.admit_intervention(
                context.id, input_id, input_digest(journal, payload), message=payload
            )
        except DurabilityError as exc:
            context.log.log(type="warning", content=f"intervention not journaled: {exc.code}")

    _in_background(admit())


def note_removed(context: AgentContext) -> None:
    """Journal that the chat was deleted, so start-up does not rebuild it."""
    note_chat_event(context, "context_removed")


def note_reset(context: AgentContext) -> None:
    """Journal that the chat was reset, so start-up rebuilds it empty."""
    note_chat_event(context, "context_reset")


def note_chat_event(context: AgentContext, event_type: str) -> None:
    journal = context.journal

    def write() -> None:
        try:
            journal.append_event(context.id, event_type)
        except DurabilityError as exc:
            logger.warning("chat %s %s not journaled: %s", context.id, event_type, exc.code)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        write()
        return
    _in_background(asyncio.to_thread(write))
