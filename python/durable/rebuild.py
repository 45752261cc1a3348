"""Rebuild chats from the journal: at start-up, in the background, on first access.

A chat is rebuilt from its latest checkpoint plus the log items of the calls journaled
after it (python/durable/restored_log.py). Reading is separate from building:
``read_chat`` only reads the journal (a thread may run it), ``build_chat`` makes the
``AgentContext`` from what was read (on the event loop once the server serves).

- ``restore_contexts(chats)`` rebuilds every chat (the tests);
  ``restore_contexts(chats, idle_later=True)`` (start-up, both engines) rebuilds only the chats
  with an open run, which recovery needs, and keeps each idle one as an ``IdleChat``: its
  name, when it was made and its log length, read from its newest checkpoint row in one
  pass over the journal (``Journal.chat_summaries``), what the chat list shows of it. That
  pass runs in a thread of its own (``IdleSummaries``), so the server answers without
  waiting for it; what needs the idle chats waits for it (python/durable/chats.py). An
  idle chat is rebuilt by ``DurableChats.load`` when a request names it, never before
  (issue #24: a rebuilt chat holds ~67 KiB; 1,000 idle chats doubled a server's memory).
- ``load_chat(chats, context_id)`` is that later rebuild of one chat: the journal read in a
  thread, the build on the loop. ``DurableChats.load`` runs it once per chat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent import AgentContext
from durability import recovery
from durability.errors import CorruptCheckpoint
from durability.status import HoldReason, RunStatus
from python.durable import checkpoint, restored_log
from python.durable.idle import IdleChat, IdleSummaries
from python.durable.notices import warn
from python.durable.session import session_of

if TYPE_CHECKING:  # pragma: no cover
    from durability import Journal
    from durability.records import Call, Checkpoint, Event
    from python.durable.ports import Chats

logger = logging.getLogger("a0.durable")
CHAT_EVENTS = ("context_removed", "context_reset", "input")
Hold = Callable[[Any], "str | None"]


@dataclass
class ChatRead:
    """What the journal holds of one chat: enough to build it without reading again."""

    context_id: str
    gone: bool = False  # no run left (retention), or removed after its newest run
    latest: Checkpoint | None = None
    calls: list[Call] = field(default_factory=list)  # journaled after ``latest``
    damaged: bool = False  # the latest checkpoint failed validation
    damaged_reason: Any = None
    error: Exception | None = None  # the read failed: the chat is shown empty
    created: float | None = None  # its first run's time: the chat list's order


def _pick(state: dict[str, Any], lengths: dict[str, int]) -> tuple[str | None, int]:
    current = state.get("current")
    name = current.get("name") if isinstance(current, dict) else None
    return (name if isinstance(name, str) and name else None), lengths.get(checkpoint.LOG_KEY, 0)


def idle_chats(journal: Journal, busy: Collection[str]) -> dict[str, IdleChat | None]:
    """What the chat list shows of every journaled chat but the ``busy`` ones, without
    rebuilding them (oldest first); None for a chat removed after its newest run (gone:
    never listed, a request for it gets 404)."""
    found: dict[str, IdleChat | None] = {}
    for summary in journal.chat_summaries(_pick, ("context_removed",)):
        context_id = summary.context_id
        if context_id in busy:
            continue
        if summary.last_events.get("context_removed", -1.0) >= summary.newest_run_at:
            found[context_id] = None  # removed: gone
            continue
        name, length = summary.picked or (None, 0)
        found[context_id] = IdleChat(name, summary.created_at, length)
    return found


def journaled_chats(journal: Journal) -> tuple[dict[str, float], set[str]]:
    """Every chat with a run, oldest chat first, with its newest run's time; and the
    chats with an open (active or held) run."""
    newest_run: dict[str, float] = {}
    open_chats: set[str] = set()
    for run in reversed(journal.list_runs(limit=1_000_000)):  # oldest first
        newest_run[run.context_id] = run.created_at
        if run.is_open:
            open_chats.add(run.context_id)
    return newest_run, open_chats


def restore_contexts(chats: Chats, *, idle_later: bool = False) -> list[AgentContext]:
    """Rebuild the journaled chats (oldest first); with ``idle_later`` only those with an
    open run, the others are left to ``DurableChats.load``. A chat deleted after its
    newest run is not rebuilt."""
    journal = chats.journal
    if idle_later:  # the open runs, oldest first (each its chat's newest: admission refuses
        # a run while one is open); the idle chats are read meanwhile, in a thread
        newest_run = {r.context_id: r.created_at for r in reversed(journal.list_nonterminal_runs())}
        busy = frozenset(newest_run)
        chats.defer(IdleSummaries(lambda: idle_chats(journal, busy)))
    else:
        newest_run = journaled_chats(journal)[0]
    restored = []
    for context_id, newest in newest_run.items():
        read = read_chat(journal, context_id, newest)

        def hold(detail: Any, context_id: str = context_id) -> str | None:
            return hold_open_run(journal, context_id, HoldReason.RECOVERY_ERROR, detail)

        context = build_chat(chats, read, hold)
        if context is not None:
            restored.append(context)
    return restored


async def load_chat(chats: Chats, context_id: str) -> AgentContext | None:
    """Rebuild one chat left for later: the journal read in a thread, the build on the
    loop (no await between making the chat and filling it). None when the journal has no
    such chat any more (removed, or retention took every run)."""
    journal = chats.journal
    read = await asyncio.to_thread(read_chat, journal, context_id)
    built = chats.get(context_id)
    if built is not None:  # a shared worker's poll or sweep loaded it meanwhile
        return built

    def hold(detail: Any) -> str | None:  # a chat left for later had no open run; if it
        # has one now, it is held all the same (in a thread: the loop does not wait)
        reason = HoldReason.RECOVERY_ERROR
        held = asyncio.to_thread(hold_open_run, journal, context_id, reason, detail)
        chats.in_background(held)
        return None

    return build_chat(chats, read, hold)


def read_chat(journal: Journal, context_id: str, newest_run: float | None = None) -> ChatRead:
    """Read what rebuilds ``context_id`` (journal reads only; never raises)."""
    read = ChatRead(context_id)
    try:
        events = _chat_events(journal, context_id)
        if newest_run is None:
            runs = journal.list_runs(context_id=context_id, limit=1)
            if not runs:
                read.gone = True
                return read
            newest_run = runs[0].created_at
        # every run starts with its "input" event: the first one dates the chat
        read.created = min((e.created_at for e in events if e.type == "input"), default=None)
        if removed_after(events, newest_run):
            read.gone = True
            return read
        try:
            latest = journal.latest_context_checkpoint(
                context_id, histories=checkpoint.current_chains
            )
        except CorruptCheckpoint as exc:
            latest, read.damaged, read.damaged_reason = None, True, exc.fields.get("reason")
        if latest is not None and not reset_after(events, latest):
            read.latest = latest
            read.calls = _calls_after(journal, context_id, latest)
    except Exception as exc:
        read.error = exc
    return read


def build_chat(chats: Chats, read: ChatRead, hold: Hold) -> AgentContext | None:
    """The chat built from ``read`` (None when gone). One chat that cannot be rebuilt never
    stops the others: ``hold(detail)`` holds its open run (returns the run id, if any) and
    the chat is shown empty with a warning."""
    if read.gone:
        return None
    context_id = read.context_id
    context: AgentContext | None
    try:
        if read.error is not None:
            raise read.error
        # its stored name: no default one to count out (the idle chats may still be read)
        name = _pick(read.latest.state, {})[0] if read.latest is not None else None
        context = chats.get(context_id) or chats.create(context_id, name=name)
        if read.created is not None:  # rebuilt late or early, the list keeps its order
            context.created_at = datetime.fromtimestamp(read.created, UTC)
        if read.damaged:
            text = "The chat's latest checkpoint failed validation; it could not be rebuilt."
            warn(context, "Checkpoint damaged", text, reason=read.damaged_reason)
        if read.latest is not None:
            state = read.latest.state.get("current") or {}
            checkpoint.restore_chain(context, state, read.latest.histories)
            restored_log.append_calls(context, read.calls)
    except Exception as exc:
        detail = recovery.error_detail(exc, "restore")
        logger.warning("chat %s could not be rebuilt: %s", context_id, detail["type"])
        context = _failed_chat(chats, context_id, detail, hold(detail))
    if context is not None:
        session_of(context).journaled = True
    return context


def _calls_after(journal: Journal, context_id: str, latest: Checkpoint) -> list[Call]:
    try:
        return restored_log.calls_after(journal, latest)
    except Exception as exc:  # the checkpoint alone still rebuilds the chat
        logger.warning("chat %s: steps after the checkpoint not shown: %s", context_id, exc)
        return []


def _failed_chat(
    chats: Chats, context_id: str, detail: Any, run_id: str | None
) -> AgentContext | None:
    """The chat could not be rebuilt: show it empty, with a warning, so a person can decide
    (its open run ``run_id``, if any, was held)."""
    try:
        context = chats.get(context_id) or chats.create(context_id)
    except Exception as again:
        logger.warning("chat %s left out: %s", context_id, type(again).__name__)
        return None
    text = f"This chat could not be rebuilt from the journal ({detail['type']}); " + (
        "its run waits for a person's decision." if run_id else "it is shown empty."
    )
    warn(context, "Chat not rebuilt", text, run_id=run_id, reason=HoldReason.RECOVERY_ERROR)
    return context


def hold_open_run(journal: Journal, context_id: str, reason: str, detail: Any) -> str | None:
    """Hold the chat's active run (if any) for a person; its id, if any. Never raises."""
    try:
        run = journal.active_run(context_id)
        if run is None:
            return None
        if run.status == RunStatus.ACTIVE:
            journal.mark_needs_attention(run.id, reason, detail)
        return run.id
    except Exception as exc:
        logger.warning("run of chat %s could not be held: %s", context_id, type(exc).__name__)
        return None


def _chat_events(journal: Journal, context_id: str) -> list[Event]:
    events = journal.list_events(context_id=context_id, limit=1_000_000, verify=False)
    return [e for e in events if e.type in CHAT_EVENTS]  # their time only


def removed_after(events: list[Event], newest_run: float) -> bool:
    """The chat was removed after its newest run: it is gone."""
    return _last(events, "context_removed") >= newest_run


def reset_after(events: list[Event], latest: Checkpoint) -> bool:
    """The chat was reset after ``latest``: the checkpoint no longer rebuilds it."""
    return _last(events, "context_reset") >= latest.created_at


def _last(events: list[Event], event_type: str) -> float:
    """When the chat last had this event (-1 when never)."""
    return max((e.created_at for e in events if e.type == event_type), default=-1.0)
