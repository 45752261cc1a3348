"""Where the scheduler meets the server: the ONE admission of a firing, and run answers.

Everything the scheduler needs from the chat machinery goes through this module, so that a
change of the admission path (the durable session refactor) re-points these few functions
and nothing else. A firing is admitted exactly like a message from a person: through
``Runtime.admit_message``, the server's one admission path, with the firing's input id
(idempotent: the same id and content returns the recorded run and starts nothing).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

logger = logging.getLogger("a0.scheduler")


def make_message(text: str, attachments: list[str], system_prompt: str, input_id: str) -> Any:
    """The firing's user message (upstream: the task's prompt, with its system prompt)."""
    from agent import UserMessage  # the loop's type; imported when a firing happens

    system = [system_prompt] if system_prompt.strip() else []
    return UserMessage(text, list(attachments), system_message=system, id=input_id)


async def admit_firing(runtime: Any, chat_id: str, message: Any, chat_name: str) -> Any:
    """Admit ``message`` to the chat ``chat_id`` (created, named ``chat_name``, when it is
    not loaded) through the server's admission path; returns its ``Admitted``
    (``kind``: started | duplicate | intervention, ``run_id``). Journal refusals
    (InputConflict, RunHeld, ActiveRunExists) propagate; a chat created here for a message
    that was not taken is dropped again without a trace in the journal."""
    created = runtime.find_context(chat_id) is None
    if created:
        runtime.create_context(chat_id, name=chat_name)
    try:
        ctx, admitted = await runtime.admit_message(chat_id, message)
    except BaseException:
        if created:
            _drop_unused_chat(runtime, chat_id)
        raise
    if ctx is not None and admitted.kind != "duplicate":
        kvps = {"task": chat_name, "input_id": message.id}
        ctx.log.log(
            type="user", heading="Scheduled task", content=message.message, kvps=kvps, id=message.id
        )
    return admitted


def _drop_unused_chat(runtime: Any, chat_id: str) -> None:
    ctx = runtime.find_context(chat_id)
    if ctx is None or ctx.is_running():
        return
    ctx.journal = None  # it never had a run: journal nothing about removing it
    with contextlib.suppress(Exception):
        runtime.remove_context(chat_id)


def run_response(journal: Any, run_id: str) -> str | None:
    """The final answer journaled for a finished run (None while it runs, when held, or
    when it ended without one)."""
    from python.helpers.durable_admission import recorded_response

    return recorded_response(journal, run_id)
