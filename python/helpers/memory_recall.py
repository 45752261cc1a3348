"""Recall: memories and solutions put into the prompt while the agent works (docs/memory.md).

Run by python/extensions/message_loop_prompts_after/_50_recall_memories.py on loop
iterations 0, n, 2n, ... (``memory_recall_interval``). The search is one journaled call of
the loop (``memory_recall``, replay class ``journal_atomic``, no writes): its result (the
texts placed in the prompt) is committed, so after a restart the resumed loop sees exactly
the memories it saw before and asks the model exactly the same; the utility model calls it
makes (query preparation, post-filter) are journaled model calls at the positions after it.

Unlike upstream, the search is awaited where upstream starts a background task: the
positions of journaled calls must not depend on timing. With ``memory_recall_delayed`` the
results still reach the prompt one step later, as upstream's agent sees them.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from python.helpers import dirty_json
from python.helpers.errors import InterventionException
from python.helpers.memory import AgentMemory, setting

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent, LoopData

logger = logging.getLogger("a0.memory")

RECALL_CALL = "memory_recall"
MEMORY_AREAS = ("main", "fragments")
SOLUTION_AREAS = ("solutions",)
PENDING_KEY = "memory_recall_pending"  # agent.data: delayed results for the next step
EXTRA_MEMORIES, EXTRA_SOLUTIONS = "memories", "solutions"


def _message_text(loop_data: LoopData) -> str:
    message = loop_data.user_message
    return message.text() if message is not None else ""


async def _query(agent: Agent, message: str, history: str) -> str:
    """The search query: the utility model's short query (``memory_recall_query_prep``), else
    the message and the history. "" means: nothing worth searching for."""
    if not setting(agent, "memory_recall_query_prep"):
        return f"{message}\n\n{history}".strip()
    system = agent.read_prompt("memory.memories_query.sys.md")
    text = agent.read_prompt("memory.memories_query.msg.md", message=message, history=history)
    query = (await agent.call_utility_model(system, text)).strip()
    return "" if query == "-" or len(query) <= 3 else query


async def _post_filter(
    agent: Agent, message: str, history: str, memories: list[str], solutions: list[str]
) -> tuple[list[str], list[str]]:
    """The utility model's choice among both lists (indices past the memories address the
    solutions); an answer that is no list keeps nothing, a failure keeps everything."""
    every = [*memories, *solutions]
    numbered = json.dumps(dict(enumerate(every)), ensure_ascii=False, indent=1)
    system = agent.read_prompt("memory.memories_filter.sys.md")
    text = agent.read_prompt(
        "memory.memories_filter.msg.md", message=message, history=history, memories=numbered
    )
    try:
        answer = dirty_json.parse(await agent.call_utility_model(system, text))
    except InterventionException:
        raise
    except Exception as exc:  # the model failed: keep what the search found
        logger.warning("memory post-filter failed: %s", type(exc).__name__)
        return memories, solutions
    if not isinstance(answer, list):
        return [], []
    chosen = [i for i in answer if isinstance(i, int) and not isinstance(i, bool)]
    kept_m = [memories[i] for i in chosen if 0 <= i < len(memories)]
    kept_s = [solutions[i - len(memories)] for i in chosen if len(memories) <= i < len(every)]
    return kept_m, kept_s


async def search(agent: Agent, memory: AgentMemory, loop_data: LoopData) -> dict[str, list[str]]:
    """The texts recall places: ``{"memories": [...], "solutions": [...]}``."""
    message = _message_text(loop_data)
    length = max(0, int(setting(agent, "memory_recall_history_len") or 0))
    history = agent.history.output_text()[-length:] if length else ""
    query = await _query(agent, message, history)
    if not query:
        return {EXTRA_MEMORIES: [], EXTRA_SOLUTIONS: []}
    threshold = float(setting(agent, "memory_recall_similarity_threshold"))
    found_m = await memory.search(
        query,
        threshold=threshold,
        limit=max(1, int(setting(agent, "memory_recall_memories_max_search"))),
        areas=MEMORY_AREAS,
    )
    found_s = await memory.search(
        query,
        threshold=threshold,
        limit=max(1, int(setting(agent, "memory_recall_solutions_max_search"))),
        areas=SOLUTION_AREAS,
    )
    memories = [m.text for m, _ in found_m]
    solutions = [m.text for m, _ in found_s]
    if (memories or solutions) and setting(agent, "memory_recall_post_filter"):
        memories, solutions = await _post_filter(agent, message, history, memories, solutions)
    return {
        EXTRA_MEMORIES: memories[: int(setting(agent, "memory_recall_memories_max_result"))],
        EXTRA_SOLUTIONS: solutions[: int(setting(agent, "memory_recall_solutions_max_result"))],
    }


def place(agent: Agent, loop_data: LoopData, found: Any) -> None:
    """Put recalled texts into the persistent extras (after the history, as upstream)."""
    extras = loop_data.extras_persistent
    if not isinstance(found, dict):
        return
    memories = [t for t in found.get(EXTRA_MEMORIES) or [] if isinstance(t, str)]
    solutions = [t for t in found.get(EXTRA_SOLUTIONS) or [] if isinstance(t, str)]
    if memories:
        extras[EXTRA_MEMORIES] = agent.read_prompt(
            "agent.system.memories.md", memories="\n\n".join(memories)
        )
    if solutions:
        extras[EXTRA_SOLUTIONS] = agent.read_prompt(
            "agent.system.solutions.md", solutions="\n\n".join(solutions)
        )


async def recall(agent: Agent, loop_data: LoopData) -> None:
    """The extension's work at one loop iteration."""
    pending = agent.data.pop(PENDING_KEY, None)
    if pending is not None:  # delayed results of the step before
        place(agent, loop_data, pending)
    if not setting(agent, "memory_recall_enabled"):
        return
    interval = max(1, int(setting(agent, "memory_recall_interval") or 1))
    if loop_data.iteration % interval != 0:
        return
    atomic = getattr(agent.context.session, "atomic_call", None)
    memory = AgentMemory.of(agent) if atomic is not None else None
    if atomic is None or memory is None or not memory.usable():
        return
    loop_data.extras_persistent.pop(EXTRA_MEMORIES, None)
    loop_data.extras_persistent.pop(EXTRA_SOLUTIONS, None)

    async def effect() -> tuple[dict[str, list[str]], list[Any]]:
        return await search(agent, memory, loop_data), []

    try:
        found = await atomic(agent, RECALL_CALL, {"iteration": loop_data.iteration}, effect)
    except InterventionException:
        raise
    except Exception as exc:  # recall is a help, never a reason for the turn to fail
        logger.warning("memory recall failed: %s: %s", type(exc).__name__, agent.mask(str(exc)))
        return
    if setting(agent, "memory_recall_delayed"):
        agent.data[PENDING_KEY] = found
        loop_data.extras_temporary["memory_recall_delayed"] = agent.read_prompt(
            "memory.recall_delay_msg.md"
        )
    else:
        place(agent, loop_data, found)
