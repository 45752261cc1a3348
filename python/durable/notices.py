"""What a chat's log says about its run's durable life: a held run, and ending a stopped run."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from durability.errors import DurabilityError, StaleVersion
from durability.integrity import Damage
from durability.records import DecisionRequest
from durability.status import DecisionKind, HoldReason

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability import Journal

logger = logging.getLogger("a0.durable")
HELD = "Run held for a decision"


def held_text(reason: str | None, detail: Any = None) -> str:
    """The chat's warning for a held run; a damaged record is named."""
    text = f"This run waits for a person's decision (reason: {reason})."
    if reason == HoldReason.CORRUPT_RECORD and isinstance(detail, dict):
        skip = ("record", "reason", "code", "message")
        ids = {k: v for k, v in detail.items() if k not in skip}
        damage = Damage(str(detail.get("record")), str(detail.get("reason")), ids)
        text += f" A journaled record is damaged and was not used: {damage.describe()}."
    return text


def warn(context: AgentContext | None, heading: str, content: str, **kvps: Any) -> None:
    """A warning in the chat's log (nothing when the chat is not loaded)."""
    if context is not None:
        context.log.log(type="warning", heading=heading, content=content, kvps=kvps)


def warn_held(context: AgentContext | None, run_id: str, reason: str | None, detail: Any) -> None:
    """The chat's warning that its run waits for a person."""
    warn(context, HELD, held_text(reason, detail), run_id=run_id, reason=reason)


def stop_quietly(journal: Journal, run_id: str) -> None:
    """The chat was stopped (Stop, reset, nudge): end the run, abandoning open calls.
    A journal write of the cancelled step may still land meanwhile: retry on its version."""
    for _ in range(10):
        try:
            run = journal.get_run(run_id)
            if run.is_open:
                stop = DecisionRequest(
                    run_id, DecisionKind.STOP, version=run.version, actor="user:stop"
                )
                journal.decide(stop)
            return
        except StaleVersion:
            continue
        except DurabilityError as exc:
            logger.warning("run %s could not be stopped: %s", run_id, exc.code)
            return
    logger.warning("run %s could not be stopped: its version kept changing", run_id)
