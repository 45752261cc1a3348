"""What the scheduler tool and the scheduler_* endpoints need from the scheduler.

The scheduler itself (tasks kept in the journal, the loop that fires their slots) is
python/durable/scheduler.py. The loop's side never imports it: a chat's session exposes
the process's scheduler as ``session.scheduler`` (python/helpers/chat_session.py), typed
with the ``TaskScheduler`` Protocol below, the way ``ChatSession`` types the session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, Protocol


class FiringKind(StrEnum):
    """What a firing did when no admission answered (else its kind is the admission's:
    started, duplicate or intervention, python/durable/admission.py ``Admitted``)."""

    RECORDED = "recorded"  # the slot's run is the chat's open run: nothing new
    DEFERRED = "deferred"  # the chat cannot take it now: tried again soon
    SKIPPED = "skipped"  # the chat's run is held: the slot is passed over
    FAILED = "failed"  # the journal refused it (``reason``: its code)


@dataclass
class Firing:
    """What one attempt to fire a task did."""

    task_id: str
    kind: str  # a FiringKind, or the admission's kind (started | duplicate | intervention)
    input_id: str
    slot: str | None = None
    run_id: str | None = None
    context_id: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TaskOrigin:
    """Where a new task comes from: who made it (``actor``, journaled with it), the id a
    client chose (a retry of the request makes nothing twice; None: a new id) and the chat
    it was made from (``default_context``: where a task without ``dedicated_context``
    runs; None: its own chat)."""

    actor: str
    task_id: str | None = None
    default_context: str | None = None


class TaskScheduler(Protocol):
    """The process's scheduler as its users see it; every method raises the journal's
    errors (task_not_found, task_conflict, task_invalid, ...) or an ApiError."""

    clock: Callable[[], float]  # the scheduler's "now" (shifted in tests)

    async def list_tasks(self) -> list[dict[str, Any]]: ...

    async def get(self, task_id: str, *, with_result: bool = False) -> dict[str, Any]: ...

    async def create(self, data: Mapping[str, Any], origin: TaskOrigin) -> dict[str, Any]: ...

    async def delete(self, task_id: str, *, expected_revision: int | None = None) -> None: ...

    async def run_now(
        self, task_id: str, *, key: str | None = None, extra_text: str = ""
    ) -> Firing: ...
