"""Plain records the journal returns. Values inside are already masked."""

from __future__ import annotations

from dataclasses import KW_ONLY, asdict, dataclass, field
from typing import Any

from durability.status import DECISIONS_NEEDING_NOTE as DECISIONS_NEEDING_NOTE
from durability.status import OPEN_RUN_STATUSES as OPEN_RUN_STATUSES
from durability.status import RESULT_STATES as RESULT_STATES
from durability.status import TERMINAL_RUN_STATUSES as TERMINAL_RUN_STATUSES
from durability.status import CallKind, CallState, DecisionKind, RunStatus


def fields_of(record: Any, *names: str) -> dict[str, Any]:
    """Some fields of a record as a dict, in the order named; ``"key=attribute"`` renames
    (``fields_of(call, "call_id=id", "seq")`` is ``{"call_id": call.id, "seq": call.seq}``)."""
    found: dict[str, Any] = {}
    for name in names:
        key, _, attribute = name.partition("=")
        found[key] = getattr(record, attribute or key)
    return found


#: The values as plain strings (they name the choices in messages and CLI help).
RUN_STATUSES = tuple(s.value for s in RunStatus)
CALL_KINDS = tuple(k.value for k in CallKind)
#: open, completed, failed, abandoned, superseded, not_completed (durability/status.py)
CALL_STATES = tuple(s.value for s in CallState)
DECISIONS = tuple(d.value for d in DecisionKind)

#: What a standing retry grant covers (durability/journal/_grants.py).
STANDING_SCOPES = ("chat", "profile", "task")
#: The most retries one grant may allow (the journal, the API and the CLI refuse more).
MAX_RETRY_ATTEMPTS = 100
#: The largest integer both backends store (versions, revisions, attempts, sizes).
MAX_INT = 2**63 - 1


class _Record:
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class Run(_Record):
    id: str
    context_id: str
    input_id: str
    input_digest: str
    status: str
    version: int
    reason: str | None
    reason_detail: Any
    recovery_attempts: int
    created_at: float
    updated_at: float

    @property
    def is_open(self) -> bool:
        return self.status in OPEN_RUN_STATUSES


@dataclass(frozen=True)
class Admission(_Record):
    run: Run
    created: bool
    kind: str  # an InputKind


@dataclass(frozen=True)
class Call(_Record):
    id: str
    run_id: str
    agent_no: int
    seq: int
    attempt: int
    kind: str
    name: str
    args: Any
    policy: str
    fingerprint: str
    state: str
    result: Any
    result_digest: str | None
    created_at: float
    closed_at: float | None

    @property
    def has_result(self) -> bool:
        return self.state in RESULT_STATES


@dataclass(frozen=True)
class CheckpointData:
    """What the loop hands to a checkpoint: small state plus one history per agent key."""

    state: dict[str, Any]
    histories: dict[str, list[Any]] = field(default_factory=dict)
    seq: int | None = None


#: How a chat came to be without a message (``Journal.record_chats``): ``chat_create`` or
#: ``chat_load``; its run's reason is ``chat_<origin>``.
CHAT_ORIGINS = ("created", "loaded")


@dataclass(frozen=True)
class NewChat:
    """A chat made by a request, journaled with its first checkpoint (``record_chats``)."""

    context_id: str
    origin: str  # one of CHAT_ORIGINS
    data: CheckpointData


@dataclass(frozen=True)
class ChatSummary(_Record):
    """A journaled chat read without rebuilding it (``Journal.chat_summaries``): when its
    first and newest runs began, when it last had each event type asked for, and what the
    caller picked from its newest checkpoint (None when it has none or it failed
    validation)."""

    context_id: str
    created_at: float
    newest_run_at: float
    last_events: dict[str, float]
    picked: Any


@dataclass(frozen=True)
class _CheckpointIdentity(_Record):
    """Which checkpoint: its row, its run and chat, and its place in the run."""

    id: int
    run_id: str
    context_id: str
    seq: int | None


@dataclass(frozen=True)
class Checkpoint(_CheckpointIdentity):
    state: dict[str, Any]
    histories: dict[str, list[Any]]
    digest: str
    created_at: float


@dataclass(frozen=True)
class CheckpointRef(_CheckpointIdentity):
    """What a write returns: the checkpoint's identity, not its (possibly large) content."""

    digest: str
    history_lengths: dict[str, int]
    created_at: float


@dataclass(frozen=True)
class Decision(_Record):
    id: int
    run_id: str
    call_id: str | None
    decision: str
    version: int
    actor: str
    note: str | None
    created_at: float


@dataclass(frozen=True)
class DecisionRequest:
    """A person's decision on a held run, made on ``version`` of it: one of the five
    (``DecisionKind``) or ``retry_model_call`` (granting ``attempts`` retries), on
    ``call_id`` (default: the uncertain call), with a ``note`` of what was checked. The one
    value the HTTP handler, the CLI and the glue hand to ``Journal.decide``, which checks it
    and records what it applied as a ``Decision``."""

    run_id: str
    decision: DecisionKind | str  # checked by the journal, with the other fields
    _: KW_ONLY
    version: int
    actor: str
    note: str | None = None
    call_id: str | None = None
    attempts: int = 1  # retry_model_call only

    def applied(self, call_id: str | None, now: float) -> Decision:
        """The record of this decision applied to ``call_id`` (its id is the store's)."""
        run, decision, version = self.run_id, self.decision, self.version
        return Decision(0, run, call_id, decision, version, self.actor, self.note, now)


@dataclass(frozen=True)
class DecisionOutcome(_Record):
    decision: Decision
    run: Run
    applied: bool  # False when an identical decision on this version was already applied


@dataclass(frozen=True)
class RetryGrant(_Record):
    id: int
    run_id: str
    attempts: int
    remaining: int
    actor: str
    created_at: float


@dataclass(frozen=True)
class StandingGrant(_Record):
    """A person's retry grant made in advance for every run of a chat, a profile or a
    scheduled task: ``attempts`` automatic retries of interrupted or failed model calls per
    run (the newest grant of a scope and target is in force; 0 withdraws it)."""

    id: int
    scope: str  # chat | profile | task
    target: str  # the chat's id, the profile's name, the task's id
    attempts: int
    actor: str
    note: str | None
    created_at: float


@dataclass(frozen=True)
class StandingGrantUse(_Record):
    """One retry a standing grant paid for: the run and the call it ran again."""

    id: int
    grant_id: int
    run_id: str
    call_id: str
    created_at: float


@dataclass(frozen=True)
class Document(_Record):
    context_id: str
    kind: str
    revision: int  # 0: never written (value is the kind's empty value)
    value: Any
    digest: str
    updated_at: float | None
    updated_by: str | None


@dataclass(frozen=True)
class Conflict(_Record):
    id: int
    context_id: str
    kind: str
    expected_revision: int
    actual_revision: int
    proposed: Any
    actor: str
    created_at: float
    resolved_at: float | None
    resolution: str | None
    resolved_by: str | None


@dataclass(frozen=True)
class Event(_Record):
    id: int
    context_id: str
    run_id: str | None
    type: str
    payload: Any
    created_at: float
    digest: str | None = None  # SHA-256 of the payload's canonical JSON (integrity.py)


@dataclass(frozen=True)
class RunDetail(_Record):
    run: Run
    calls: list[Call]
    decisions: list[Decision]
