"""Chats made without a message (chat_create, chat_load): journaled before they exist.

A chat is rebuilt from its latest checkpoint, and a checkpoint belongs to a run. So a chat
that a request makes (empty, or loaded from an export with its log and history) is
journaled as a run that ends as it starts: one transaction inserts the run (``completed``,
reason ``chat_created`` or ``chat_loaded``), its ``input`` event (which dates the chat) and
the chat's first checkpoint (masked and stored as history chains like every checkpoint).
Its input id is not an idempotency record: no client input can name that run. The chats of
one request are journaled in one transaction: all of them or none.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from durability import checkpoints
from durability.canonical import canonical_json, digest, digest_text
from durability.errors import ActiveRunExists, InvalidArgument
from durability.ids import new_id
from durability.journal._checkpoints import apply_cache
from durability.journal._operation import JournalBase, operation
from durability.journal._plan import Plan, read, write
from durability.journal._validation import require_text
from durability.records import CHAT_ORIGINS, ChatSummary, CheckpointData, NewChat, Run
from durability.status import RunStatus
from durability.store.base import StoreTx
from durability.store.checkpoint_entries import entry_length


def _check(chat: object) -> NewChat:
    if not isinstance(chat, NewChat):
        raise InvalidArgument("each chat must be a NewChat", field="chats")
    require_text("context_id", chat.context_id)
    if chat.origin not in CHAT_ORIGINS:
        raise InvalidArgument(f"origin must be one of {', '.join(CHAT_ORIGINS)}", field="origin")
    data = chat.data
    if not isinstance(data, CheckpointData):
        raise InvalidArgument("data must be a CheckpointData", field="data")
    if not isinstance(data.state, dict) or not isinstance(data.histories, dict):
        raise InvalidArgument("state and histories must be dicts", field="data")
    canonical_json(data.state)  # histories are checked message by message when stored
    return chat


class ChatOps:
    """Chats made without a message."""

    @operation(prepare="pool")
    def record_chats(journal: JournalBase, chats: Sequence[NewChat]) -> Plan[list[Run]]:
        """Journal chats made without a message, each as a finished run with its first
        checkpoint, all in one transaction."""
        return _record_chats(journal, chats)

    @operation()
    def chat_summaries(
        journal: JournalBase,
        pick: Callable[[dict[str, Any], dict[str, int]], Any],
        event_types: Sequence[str] = (),
    ) -> Plan[list[ChatSummary]]:
        """Every journaled chat, oldest first, without rebuilding it: ``pick(state,
        history_lengths)`` of its newest checkpoint (its state as stored, the length of each
        history), and when it last had an event of each of ``event_types``. One read of
        each run's newest checkpoint row, no history chain."""
        types = tuple(str(t) for t in event_types)

        def op(tx: StoreTx) -> list[ChatSummary]:
            spans = tx.runs.chat_spans()
            newest = tx.checkpoints.newest_per_chat()
            events = tx.events.last_of(types) if types else {}
            found = []
            for context_id, (first, last) in sorted(spans.items(), key=lambda i: i[1][0]):
                row = newest.get(context_id)
                picked = _pick(pick, *row[1:]) if row is not None else None
                marks = {t: events[(context_id, t)] for t in types if (context_id, t) in events}
                found.append(ChatSummary(context_id, first, last, marks, picked))
            return found

        return read(op)


def _pick(pick: Callable[[dict[str, Any], dict[str, int]], Any], body: str, sha: str) -> Any:
    """What ``pick`` takes from a checkpoint body; None when the body fails validation (the
    chat's rebuild reports it)."""
    if digest_text(body) != sha:
        return None
    try:
        decoded = json.loads(body)
        state, histories = decoded["state"], decoded["histories"]
        lengths = {str(k): entry_length(decoded, v) for k, v in histories.items()}
        return pick(state, lengths) if isinstance(state, dict) else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _record_chats(journal: JournalBase, chats: Sequence[NewChat]) -> Plan[list[Run]]:
    checked = [_check(chat) for chat in chats]
    if len({c.context_id for c in checked}) != len(checked):
        raise InvalidArgument("each chat needs its own context_id", field="context_id")
    now = journal.clock()
    cache_update: list[Any] = []

    def op(tx: StoreTx) -> list[Run]:
        cache_update.clear()  # a backend may run op again (e.g. after a conflict)
        runs = []
        for chat in checked:
            context_id = chat.context_id
            open_run = tx.runs.open_for_context(context_id)
            if open_run is not None:
                raise ActiveRunExists(
                    "the chat already has an active run", context_id=context_id, run_id=open_run.id
                )
            tx.contexts.ensure(context_id, now)
            run_id = new_id()
            input_id = f"chat_{chat.origin}:{run_id}"
            run = Run(
                id=run_id,
                context_id=context_id,
                input_id=input_id,
                input_digest=digest({"chat": chat.origin, "context_id": context_id}),
                status=RunStatus.COMPLETED,
                version=1,
                reason=f"chat_{chat.origin}",
                reason_detail=None,
                recovery_attempts=0,
                created_at=now,
                updated_at=now,
            )
            tx.runs.insert(run)
            event = {"input_id": input_id, "message": None, "chat": chat.origin}
            tx.events.insert(context_id, run_id, "input", event, now, digest(event))
            _, entry = checkpoints.store_checkpoint(
                tx, journal.masker, journal.history_cache, run_id, context_id, chat.data, now
            )
            cache_update.append((context_id, entry))
            runs.append(run)
        return runs

    def after(runs: list[Run]) -> list[Run]:
        apply_cache(journal, cache_update)
        return runs

    return write(op, after=after)
