"""process_chain_end: name the chat after its first exchange with the utility model (#23).

Upstream renames a chat in a background task at every monologue start. Here the call is
made once the chat's first answer is in, by agent 0 at the end of its chain, through the
model seam: it is journaled like any model call (a crash after it reuses the recorded
title, never asks again), and at the same position on every resume, so it keeps the run's
sequence deterministic. The new name is checkpointed at once, so it survives a restart and
every shared worker sees it. The history sent is cut to min(0.7 x utility context, 5000)
tokens, newest kept; a title is cut to 40 characters ("..." added). A failure leaves the
name as it was and never fails the turn. Setting ``chat_rename`` (default on) turns it off.
"""

from __future__ import annotations

from typing import Any

from python.helpers.extensions import Extension

RENAMED = "chat_renamed"  # agent 0's data: the utility model has named the chat
MAX_NAME = 40
MAX_TOKENS = 5000


def _history_text(agent: Any) -> str:
    config = agent.config.model_config("utility")
    budget = int(min(0.7 * config.ctx_length, MAX_TOKENS)) * 4  # ~4 characters a token
    text = agent.history.output_text()
    return text[-budget:] if len(text) > budget else text


def clean_name(text: str) -> str:
    name = " ".join(str(text).split()).strip().strip("\"'`").strip()
    if len(name) > MAX_NAME:
        name = name[:MAX_NAME].rstrip() + "..."
    return name


class RenameChat(Extension):
    async def execute(self, data: dict | None = None, **kwargs: Any) -> None:
        agent = self.agent
        if agent is None or agent.number != 0 or agent.data.get(RENAMED):
            return
        if not agent.config.settings.get("chat_rename", True):
            return
        context = agent.context
        current = context.name or ""
        try:
            reply = await agent.call_utility_model(
                agent.read_prompt("fw.rename_chat.sys.md"),
                agent.read_prompt(
                    "fw.rename_chat.msg.md", current_name=current, history=_history_text(agent)
                ),
            )
        except Exception:  # a title is not worth a failed turn (the call's outcome is journaled)
            return
        name = clean_name(agent.mask(reply))
        agent.data[RENAMED] = True
        if name:
            context.name = name
        await context.session.iteration_end(agent, final=True)  # checkpoint: the name persists
