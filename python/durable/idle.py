"""A journaled chat not rebuilt since start-up, as the chat list shows it (issue #24).

Start-up reads one ``IdleChat`` per idle chat from its newest checkpoint row
(python/durable/rebuild.py: ``idle_chats``); ``DurableChats`` keeps them until a request
names the chat, which rebuilds it; ``poll`` lists them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IdleChat:
    """A journaled chat not rebuilt yet, as the chat list shows it."""

    name: str | None
    created_at: float  # its first run's time: the chat list's order
    log_length: int  # as its newest checkpoint has it
