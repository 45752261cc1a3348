"""Every status, state, policy, reason and decision the journal stores, named once.

They are ``StrEnum``s: a member compares equal to its string and is stored as it, so the
journal's rows keep the values they always had (no schema change) and a value read back
from the database (a plain ``str``) compares equal to the member.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A run's status (``runs.status``)."""

    ACTIVE = "active"
    NEEDS_ATTENTION = "needs_attention"  # held for a person's decision
    COMPLETED = "completed"
    STOPPED = "stopped"
    FAILED = "failed"


OPEN_RUN_STATUSES = (RunStatus.ACTIVE, RunStatus.NEEDS_ATTENTION)
TERMINAL_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED)


class InputKind(StrEnum):
    """What an admitted input is (``inputs.kind``)."""

    RUN = "run"  # a new input: it starts a run
    INTERVENTION = "intervention"  # a message journaled on the chat's active run


class CallState(StrEnum):
    """A call's state (``calls.state``).

    open: intent on disk, no result. completed / failed: result committed. abandoned:
    outcome unknown, left behind (resume / stop). superseded: outcome unknown, re-run on
    purpose as attempt + 1 (new_attempt). not_completed: a person confirmed it never
    happened; the next intent at that position is its first real execution.
    """

    OPEN = "open"
    COMPLETED = "completed"
    FAILED = "failed"
    ABANDONED = "abandoned"
    SUPERSEDED = "superseded"
    NOT_COMPLETED = "not_completed"


RESULT_STATES = (CallState.COMPLETED, CallState.FAILED)


class CallKind(StrEnum):
    MODEL = "model"
    TOOL = "tool"
    SUBORDINATE = "subordinate"


class Policy(StrEnum):
    """A call's replay policy, chosen by the engine (python/durable/policy.py)."""

    HOLD = "hold"  # nothing proves the outcome: an open intent is held for a person
    SAFE_REPLAY = "safe_replay"  # pinned in durability/replay.py: replayed
    CHILD = "child"  # a pinned child workflow: it resumes inside the run
    SHELL = "adapter:shell"  # shell receipts prove the outcome (durability/adapters/shell.py)
    PTY = "adapter:pty"  # typed input: delivery receipts prove it (durability/adapters/pty.py)
    #: the effect commits in the journal's own transaction with its result (DESIGN section
    #: 5): the memory tools and the loop's memory calls (python/durable/atomic.py)
    JOURNAL_ATOMIC = "journal_atomic"


#: A policy naming a receipt adapter starts with this (``adapter:shell``).
ADAPTER_PREFIX = "adapter:"


class DecisionKind(StrEnum):
    """The five decisions a person makes on a held run (DESIGN section 5)."""

    RESUME = "resume"
    STOP = "stop"
    NEW_ATTEMPT = "new_attempt"
    CONFIRMED_COMPLETED = "confirmed_completed"
    CONFIRMED_NOT_COMPLETED = "confirmed_not_completed"


DECISIONS_NEEDING_NOTE = (DecisionKind.CONFIRMED_COMPLETED, DecisionKind.CONFIRMED_NOT_COMPLETED)


class HoldReason(StrEnum):
    """Why a run waits for a person (``runs.reason`` of a ``needs_attention`` run)."""

    UNCERTAIN_CALL = "uncertain_call"
    CORRUPT_CHECKPOINT = "corrupt_checkpoint"
    CORRUPT_RECORD = "corrupt_record"
    RECOVERY_ATTEMPTS_EXCEEDED = "recovery_attempts_exceeded"
    RECOVERY_ERROR = "recovery_error"
    REPLAY_DIVERGENCE = "replay_divergence"
    MODEL_FAILED = "model_failed"
    HELD = "held"  # a hold that named no reason


class Permit(StrEnum):
    """What recovery allows an open call found at start-up (or on a takeover)."""

    REPLAY = "replay"  # a safe-replay tool whose pin still matches
    RUN = "run"  # proven never started: its first real execution
    WATCH = "watch"  # its process still runs: wait for its exit marker (adoption)


class ReceiptOutcome(StrEnum):
    """What a receipt adapter proves about one open call."""

    COMPLETED = "completed"
    NOT_STARTED = "not_started"
    UNKNOWN = "unknown"
    REJECTED = "rejected"
    HOST_UNREACHABLE = "host_unreachable"  # the host holding the receipt did not answer


class EvidenceOutcome(StrEnum):
    """What new evidence proved about a held run's uncertain call (``reclassify``)."""

    COMPLETED = "completed"
    NOT_STARTED = "not_started"
    WATCH = "watch"  # it still runs: left open, the loop watches it


class FencingReason(StrEnum):
    """Why a shared worker's fenced write was refused (``FencingLost.reason``)."""

    NOT_CLAIMED = "not_claimed"  # this worker holds no claim on the run
    SUPERSEDED = "superseded"  # another worker's newer claim replaced this one's token


class PlanAction(StrEnum):
    """What start-up recovery does with one open run."""

    RESUME = "resume"
    HOLD = "hold"
    SKIP = "skip"  # already held: never re-queued, its version unchanged
