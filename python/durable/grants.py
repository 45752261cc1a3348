"""Which standing retry grants cover a chat's runs (#23): the chat itself, the scheduled task
whose chat it is, and the profile its agent 0 runs (most specific first). The journal keeps
the grants and their uses (durability/journal/_grants.py); the glue names the scopes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from agent import AgentContext
    from durability import Journal
    from durability.records import Call, Run
    from durability.schedules import ScheduledTask
    from python.durable.ports import Chats

Scopes = list[tuple[str, str]]


def task_chats(tasks: list[ScheduledTask]) -> dict[str, str]:
    """Chat id -> the id of the scheduled task that fires into it."""
    found: dict[str, str] = {}
    for task in tasks:
        definition = task.definition if isinstance(task.definition, dict) else {}
        chat = definition.get("context_id")
        if isinstance(chat, str) and chat:
            found.setdefault(chat, task.id)
    return found


def scopes(context_id: str, profile: str | None, task_id: str | None) -> Scopes:
    found: Scopes = [("chat", context_id)]
    if task_id:
        found.append(("task", task_id))
    if profile:
        found.append(("profile", profile))
    return found


def profile_of(context: AgentContext | None) -> str | None:
    return getattr(getattr(context, "config", None), "profile", None) or None


async def of_chat(journal: Journal, context: AgentContext) -> Scopes:
    """The scopes of the chat's runs, for a retry the loop asks for."""
    tasks = task_chats(await journal.aio.list_tasks())
    return scopes(context.id, profile_of(context), tasks.get(context.id))


def for_recovery(chats: Chats) -> Callable[[Run], Scopes]:
    """The scopes of each run start-up recovery classifies (read in its thread)."""
    tasks: dict[str, str] | None = None

    def scopes_of(run: Run) -> Scopes:
        nonlocal tasks
        if tasks is None:
            tasks = task_chats(chats.journal.list_tasks())
        context = chats.get(run.context_id)
        return scopes(run.context_id, profile_of(context), tasks.get(run.context_id))

    return scopes_of


async def consume(journal: Journal, context: AgentContext, run_id: str, call: Call) -> bool:
    """Use one retry of a failed model call: the run's own grant, else a standing grant of
    the chat's scopes (then the chat says so). False when none is left."""
    scopes = await of_chat(journal, context)
    used = len(await journal.aio.standing_grant_uses(run_id))
    granted = await journal.aio.consume_retry(run_id, call_id=call.id, scopes=scopes)
    if granted and len(await journal.aio.standing_grant_uses(run_id)) > used:
        await note_used(journal, context, run_id)
    return granted


async def note_used(journal: Journal, context: AgentContext, run_id: str) -> None:
    """Say in the chat that a standing grant paid for a retry (the run's detail lists it)."""
    uses = await journal.aio.standing_grant_uses(run_id)
    if not uses:
        return
    use, grant = uses[-1]
    who = f"{grant.actor}" if grant is not None else "someone"
    scope = f"{grant.scope} {grant.target}" if grant is not None else "?"
    note = f" ({grant.note})" if grant is not None and grant.note else ""
    context.log.log(
        type="info",
        heading="Model call retried by a standing grant",
        content=f"The model call was tried again, as {who} authorised in advance for "
        f"{scope}{note}.",
        kvps={"run_id": run_id, "call_id": use.call_id, "grant_id": use.grant_id},
    )
