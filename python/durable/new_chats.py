"""Chats a request makes without a message: ``chat_create`` (empty) and ``chat_load`` (the
log and agent 0's history of an export).

Such a chat is journaled before it exists here (``Journal.record_chats``: a finished run
holding the chat's first checkpoint, durability/journal/_chats.py), so a restart, clean or
after SIGKILL, rebuilds it the way it rebuilds every chat (python/durable/rebuild.py). The
live chat is made from the very projection that was journaled (``restore_chain``), so the
rebuilt one is the same chat. The chats of one request are journaled in one transaction:
all of them exist afterwards, or none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from agent import AgentConfig, AgentContext, new_context_id
from durability.records import NewChat
from python.durable import checkpoint
from python.durable.run import Projection
from python.durable.session import session_of
from python.helpers.errors import ChatExists
from python.helpers.history import History
from python.helpers.log import Log

if TYPE_CHECKING:  # pragma: no cover
    from python.durable.ports import Chats


@dataclass(frozen=True)
class ChatSpec:
    """One chat to make. ``origin``: ``created`` (chat_create) or ``loaded`` (chat_load)."""

    origin: str
    id: str | None = None  # the id asked for
    name: str | None = None
    #: True: an id in use is refused (409 ``context_exists``); False: the chat gets a new id
    keep_id: bool = False
    history: History | None = None  # agent 0's history (checked by the caller)
    log: Log | None = None  # the chat's log items (checked by the caller)


async def open_chats(chats: Chats, specs: Sequence[ChatSpec]) -> list[AgentContext]:
    """Journal the chats of one request in one transaction, then make them here; in the
    order of ``specs``. Ids are picked under one lock, so two requests never take one id."""
    await chats.settled()  # the ids and default names of the idle chats are taken
    async with chats.opening:
        ids: list[str] = []
        for spec in specs:
            ids.append(await _pick_id(chats, spec, ids))
        unnamed = iter(chats.next_chat_names(sum(1 for spec in specs if not spec.name)))
        specs = [spec if spec.name else replace(spec, name=next(unnamed)) for spec in specs]
        configs = [chats.config() for _ in specs]
        projections = [
            checkpoint.new_chat_projection(config, spec.name, spec.history, spec.log)
            for spec, config in zip(specs, configs, strict=True)
        ]
        records = [
            NewChat(context_id, spec.origin, checkpoint.first_checkpoint(*projection))
            for context_id, spec, projection in zip(ids, specs, projections, strict=True)
        ]
        work = asyncio.ensure_future(chats.journal.aio.record_chats(records))
        cancelled = False
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:  # journaled all the same: make the chats, then stop
            await work
            cancelled = True
        made = [
            _make(chats, context_id, spec, config, projection)
            for context_id, spec, config, projection in zip(
                ids, specs, configs, projections, strict=True
            )
        ]
    if cancelled:
        raise asyncio.CancelledError
    return made


def _make(
    chats: Chats,
    context_id: str,
    spec: ChatSpec,
    config: AgentConfig,
    projection: Projection,
) -> AgentContext:
    context = chats.create(context_id, name=spec.name, config=config)
    state, histories = projection
    checkpoint.restore_chain(context, state, histories)
    session_of(context).journaled = True
    return context


async def _pick_id(chats: Chats, spec: ChatSpec, picked: list[str]) -> str:
    wanted = spec.id
    if wanted and (wanted in picked or await _taken(chats, wanted)):
        if spec.keep_id:
            raise ChatExists(f"Chat '{wanted}' already exists.")
        wanted = None
    while not wanted or wanted in picked or await _taken(chats, wanted):
        wanted = new_context_id()
    return wanted


async def _taken(chats: Chats, context_id: str) -> bool:
    """The id names a chat: loaded here, journaled and not rebuilt yet, or (shared workers)
    journaled by another worker."""
    if chats.get(context_id) is not None or chats.is_deferred(context_id):
        return True
    if not chats.ownership.others_may_run:  # every journaled chat here is one of the above
        return False
    return bool(await chats.journal.aio.list_runs(None, context_id=context_id, limit=1))
