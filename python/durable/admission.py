"""Admission: every message gets an input id and a content digest before anything runs.

Same id and digest: the recorded run (and its answer) comes back and nothing starts.
Same id, other content: InputConflict. A held chat refuses with RunHeld. A message while
the chat's run is working becomes a journaled intervention on that run. The session
(python/durable/session.py) and the process's entry point (``DurableChats.submit``) use
the pieces here; ``Submission`` is the one answer every caller gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from durability.canonical import digest, digest_bytes
from durability.status import RunStatus

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, AgentContext, UserMessage
    from durability import Journal
    from durability.records import Admission

#: Statuses whose run has no answer for a client (yet, or ever).
NO_ANSWER = (RunStatus.NEEDS_ATTENTION, RunStatus.ACTIVE, RunStatus.STOPPED)


class Admitted(StrEnum):
    """What the admission did with a message (``Submission.kind``)."""

    STARTED = "started"  # a new run
    DUPLICATE = "duplicate"  # a copy of an input admitted before: its recorded run
    INTERVENTION = "intervention"  # the chat's run was working: it gets the message


@dataclass
class Submission:
    """What happened to a submitted message (every caller gets this one type)."""

    kind: Admitted
    run_id: str
    input_id: str
    status: str
    task: asyncio.Task[str] | None = None  # the chat task that produces the answer
    response: str | None = None  # a duplicate's recorded answer, when its run ended
    context_id: str = ""  # the chat the run belongs to (a duplicate may name another)


@dataclass(frozen=True)
class SubmitOptions:
    """How a message comes to ``DurableChats.submit`` (each caller sets its own part).

    ``follow_input``: a client's retry (its input id is looked up first, the chat of the
    first copy answers). ``create``: the scheduler's case, an unknown chat is made with the
    id asked for and this name. ``here`` and ``handed``: the chat's own task submits
    (``DurableSession.admit``). ``profile``: the agent profile of a chat made here
    (api_message's ``agent_profile``)."""

    follow_input: bool = False
    create: str | None = None
    here: Agent | None = None
    handed: bool = False
    profile: str | None = None


#: A message with nothing particular about how it came (a web message to a known chat).
PLAIN = SubmitOptions()


@dataclass(frozen=True)
class Content:
    """What identifies a message: its input id, the payload journaled and its digest."""

    input_id: str
    payload: dict[str, Any]
    digest: str


IMAGES_KEY = "images"


def _file_digest(path: str) -> str | None:
    try:
        return digest_bytes(Path(path).read_bytes())
    except OSError:
        return None


def input_payload(msg: UserMessage) -> dict[str, Any]:
    """What identifies a message's content: text, attachments (name + digest), system text;
    and, when the attachments gave any, their image parts (journal blobs, #20)."""
    payload: dict[str, Any] = {
        "message": msg.message,
        "attachments": [{"name": Path(a).name, "digest": _file_digest(a)} for a in msg.attachments],
        "system_message": list(msg.system_message),
    }
    if msg.images:
        payload[IMAGES_KEY] = [dict(p) for p in msg.images]
    return payload


def input_digest(journal: Journal, payload: dict[str, Any]) -> str:
    """SHA-256 of the masked canonical JSON of the payload. The image parts are left out:
    they are derived from the attachments (whose digests are in), so a retry sent after
    ``chat_model_vision`` changed is the same input, not a conflict."""
    identity = {k: v for k, v in payload.items() if k != IMAGES_KEY}
    return digest(journal.masker.mask(identity))


def mask_message(context: AgentContext, msg: UserMessage) -> UserMessage:
    """Where a message enters: every known secret in its text becomes ``§§secret(NAME)``
    (in place, so the caller logs the masked text) before the agent, the model, the journal
    or a log sees it; a retried message is masked the same way, so its digest matches."""
    msg.message = str(context.mask(msg.message))
    msg.system_message = [str(context.mask(text)) for text in msg.system_message]
    return msg


def ensure_input_id(msg: UserMessage) -> str:
    """The message's input id; a generated uuid4 hex is written back when it had none."""
    if not msg.id:
        msg.id = uuid.uuid4().hex
    return msg.id


async def content(journal: Journal, msg: UserMessage) -> Content:
    """The message's input id, payload and digest (attachments are read off the loop)."""
    input_id = ensure_input_id(msg)
    payload = await asyncio.to_thread(input_payload, msg)
    return Content(input_id, payload, input_digest(journal, payload))


def recorded_response(journal: Journal, run_id: str) -> str | None:
    """The final answer journaled for a run, if it ended with one."""
    events = journal.list_events(run_id=run_id, limit=100_000)
    for event in reversed(events):
        if event.type == "run_result" and isinstance(event.payload, dict):
            response = event.payload.get("response")
            return response if isinstance(response, str) else None
    return None


async def duplicate(
    journal: Journal, adm: Admission, input_id: str, owner: AgentContext | None
) -> Submission:
    """The recorded run of an input seen before: its answer when it ended, else the task of
    its chat (``owner``, the run's chat when loaded in this process) to wait on while it
    works. The chat may be another one than the caller named: a racing copy of the request
    got there first."""
    run = adm.run
    task = None
    response = None
    if run.status == RunStatus.ACTIVE:
        if owner is not None and owner.is_running():
            task = owner.task  # one open run per chat: the working task is this run's
    elif run.status not in NO_ANSWER:  # completed or failed: it has its answer
        response = await asyncio.to_thread(recorded_response, journal, run.id)
    return Submission(
        Admitted.DUPLICATE, run.id, input_id, run.status, task, response, run.context_id
    )


async def outcome(
    journal: Journal, submission: Submission, answer: str | None
) -> tuple[str, str | None]:
    """(run status, response) once the run's task ended: a held, open or stopped run has
    no response; a duplicate's answer is the recorded one."""
    run = await journal.aio.get_run(submission.run_id)
    if run.status in NO_ANSWER:
        return run.status, None
    if answer is None or submission.kind == Admitted.DUPLICATE:
        answer = await asyncio.to_thread(recorded_response, journal, submission.run_id)
    return run.status, answer


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
