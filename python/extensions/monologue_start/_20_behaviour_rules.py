"""monologue_start: read the memory subdir's behaviour rules once per monologue, as a
journaled call (``behaviour_rules``, replay class ``journal_atomic``, no writes), into
``agent.data`` (checkpointed). The system prompt shows that copy
(system_prompt/_20_behaviour_prompt.py): a resumed loop builds exactly the prompt it built
before the crash, even when the rules changed since (a behaviour_adjustment that committed
just before it)."""

from __future__ import annotations

import logging
from typing import Any

from python.helpers.errors import InterventionException
from python.helpers.extension import Extension
from python.helpers.memory import RULES_DATA_KEY, AgentMemory

logger = logging.getLogger("a0.memory")


class BehaviourRules(Extension):
    async def execute(self, loop_data: Any = None, **kwargs: Any) -> None:
        agent = self.agent
        if loop_data is not None and loop_data.iteration >= 0:
            return  # a resumed monologue: its rules are the checkpoint's
        atomic = getattr(agent.context.session, "atomic_call", None)
        memory = AgentMemory.of(agent) if atomic is not None else None
        if atomic is None or memory is None or not memory.usable():
            agent.data.pop(RULES_DATA_KEY, None)
            return

        async def effect() -> tuple[str, list[Any]]:
            return await memory.rules(), []

        try:
            agent.data[RULES_DATA_KEY] = str(await atomic(agent, "behaviour_rules", {}, effect))
        except InterventionException:
            raise
        except Exception as exc:  # a prompt without rules beats no turn
            logger.warning("behaviour rules unreadable: %s", type(exc).__name__)
