"""Memorize: at the end of a monologue, facts (area ``fragments``) and solved problems (area
``solutions``) are picked from the conversation and stored (docs/memory.md).

Run by python/extensions/monologue_end/_50_memorize_fragments.py and
_51_memorize_solutions.py, for every agent, when the monologue ended with an answer. Each is
one journaled call of the loop (``memorize_fragments`` / ``memorize_solutions``, replay class
``journal_atomic``): the utility model's answers are journaled model calls at the positions
after it, and every write (inserts, and the deletes of a consolidation) commits in one
transaction with the call's result. After a crash either all of it is stored and the result
is reused, or none of it is and the call runs again, reusing the model's committed answers.

Consolidation (``memory_memorize_consolidation``): each new item is compared with similar
stored memories of its area (a search with the item, and one per keyword the utility model
names); with none it is inserted, else the utility model decides to skip, keep separate,
merge, update or replace. A replace removes only memories at or above
``memory_memorize_replace_threshold``; otherwise the item is kept separately
(``consolidation_action: keep_separate_safety``). Without consolidation, stored memories at or
above that threshold are replaced by the new item (0: never).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any

from python.helpers import dirty_json
from python.helpers.errors import InterventionException
from python.helpers.memory import AgentMemory, setting

if TYPE_CHECKING:  # pragma: no cover
    from agent import Agent
    from durability.memory import Memory, MemoryWrite

logger = logging.getLogger("a0.memory")

FRAGMENTS, SOLUTIONS = "fragments", "solutions"
_SEARCH_LIMIT = {FRAGMENTS: 8, SOLUTIONS: 6}
_SHOWN = {FRAGMENTS: 4, SOLUTIONS: 3}
_SIMILAR = 0.7
_ACTIONS = ("skip", "keep_separate", "merge", "update", "replace")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def items_of(answer: str, area: str) -> list[str]:
    """The texts to store from the utility model's answer (a lone item counts as a list)."""
    texts = []
    for item in _as_list(dirty_json.parse(answer)):
        if area == SOLUTIONS and isinstance(item, dict):
            problem, solution = str(item.get("problem") or ""), str(item.get("solution") or "")
            if problem.strip() and solution.strip():
                texts.append(f"# Problem\n{problem.strip()}\n# Solution\n{solution.strip()}")
        elif isinstance(item, str) and item.strip():
            texts.append(item.strip())
    return texts


class Memorizer:
    """The writes of one memorize call, built item by item."""

    def __init__(self, agent: Agent, memory: AgentMemory, area: str) -> None:
        self.agent, self.memory, self.area = agent, memory, area
        self.writes: list[MemoryWrite] = []
        self.saved: list[str] = []
        self.removed: list[str] = []
        self.actions: list[str] = []

    async def insert(self, text: str, metadata: dict[str, Any] | None = None) -> None:
        memory_id, write = await self.memory.save_write(text, self.area, metadata)
        self.writes.append(write)
        self.saved.append(memory_id)

    def remove(self, ids: list[str]) -> None:
        if ids:
            self.writes.append(self.memory.delete_write(ids))
            self.removed.extend(ids)

    async def add(self, text: str) -> None:
        threshold = float(setting(self.agent, "memory_memorize_replace_threshold"))
        if setting(self.agent, "memory_memorize_consolidation"):
            await self.consolidate(text, threshold)
            return
        if threshold > 0:
            self.writes.append(
                await self.memory.forget_write(text, threshold=threshold, area=self.area)
            )
        self.actions.append("insert")
        await self.insert(text)

    async def _similar(self, text: str) -> list[tuple[Memory, float]]:
        limit = _SEARCH_LIMIT[self.area]
        found = {
            m.id: (m, s)
            for m, s in await self.memory.search(
                text, threshold=_SIMILAR, limit=limit, areas=self.area
            )
        }
        system = self.agent.read_prompt("memory.keyword_extraction.sys.md")
        keywords = [
            str(k) for k in _as_list(dirty_json.parse(await self._ask(system, text))) if str(k)
        ][:4]
        for keyword in keywords:
            each = max(3, limit // len(keywords))
            for m, s in await self.memory.search(
                keyword, threshold=_SIMILAR, limit=each, areas=self.area
            ):
                if m.id not in found or found[m.id][1] < s:
                    found[m.id] = (m, s)
        return sorted(found.values(), key=lambda pair: (-pair[1], pair[0].id))

    async def _ask(self, system: str, message: str) -> str:
        return await self.agent.call_utility_model(system, message)

    async def consolidate(self, text: str, threshold: float) -> None:
        similar = (await self._similar(text))[: _SHOWN[self.area]]
        if not similar:
            self.actions.append("insert")
            await self.insert(text)
            return
        shown = "\n\n".join(
            f"id: {m.id}\ntimestamp: {m.timestamp}\ncontent: {m.text}" for m, _ in similar
        )
        message = self.agent.read_prompt(
            "memory.consolidation.msg.md", new_memory=text, similar_memories=shown
        )
        answer = dirty_json.parse(
            await self._ask(self.agent.read_prompt("memory.consolidation.sys.md"), message)
        )
        plan = answer if isinstance(answer, dict) else {}
        action = str(plan.get("action") or "skip")
        action = action if action in _ACTIONS else "skip"
        await self._apply(action, plan, text, dict(similar_scores(similar)), similar, threshold)

    async def _apply(
        self,
        action: str,
        plan: dict[str, Any],
        text: str,
        scores: dict[str, float],
        similar: list[tuple[Memory, float]],
        threshold: float,
    ) -> None:
        content = str(plan.get("new_memory_content") or "").strip() or text
        llm_meta: dict[str, Any] = _dict(plan.get("metadata"))
        remove = [str(i) for i in _as_list(plan.get("memories_to_remove")) if str(i) in scores]
        if action == "replace" and any(scores[i] < threshold for i in remove):
            action = "keep_separate_safety"
        self.actions.append(action)
        if action in ("skip", "keep_separate", "keep_separate_safety"):
            chosen = text if action == "skip" else content
            await self.insert(chosen, {**llm_meta, "consolidation_action": action})
            return
        if action == "update":
            for change in _as_list(plan.get("memories_to_update")):
                if not isinstance(change, dict) or str(change.get("id")) not in scores:
                    continue
                old = next(m for m, _ in similar if m.id == str(change.get("id")))
                meta = _dict(change.get("metadata"))
                new_text = str(change.get("new_content") or "").strip() or old.text
                self.remove([old.id])
                merged = {**old.metadata, **meta, "consolidation_action": "update"}
                await self.insert(new_text, {**merged, "updated_from": old.id})
            if str(plan.get("new_memory_content") or "").strip():
                await self.insert(content, {**llm_meta, "consolidation_action": "update"})
            return
        olds = [m for m, _ in similar if m.id in remove]
        metadata: dict[str, Any] = {}
        for old in olds:  # old memories fill only missing keys
            for key, value in old.metadata.items():
                metadata.setdefault(key, value)
        metadata.update(llm_meta)
        key = "consolidated_from" if action == "merge" else "replaced_memories"
        self.remove(remove)
        await self.insert(content, {**metadata, "consolidation_action": action, key: remove})


def _dict(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def similar_scores(similar: list[tuple[Memory, float]]) -> list[tuple[str, float]]:
    return [(m.id, s) for m, s in similar]


async def memorize(agent: Agent, area: str) -> None:
    """The extension's work at the end of a monologue (``area``: fragments or solutions)."""
    if sys.exc_info()[0] is not None:  # the monologue ended by an error or a hold: no answer
        return
    if not setting(agent, "memory_memorize_enabled"):
        return
    atomic = getattr(agent.context.session, "atomic_call", None)
    memory = AgentMemory.of(agent) if atomic is not None else None
    if atomic is None or memory is None or not memory.usable():
        return
    history = agent.history.output_text()
    if not history.strip():
        return
    prompt = "memory.memories_sum.sys.md" if area == FRAGMENTS else "memory.solutions_sum.sys.md"

    async def effect() -> tuple[dict[str, Any], list[Any]]:
        system = agent.read_prompt(prompt)
        message = agent.read_prompt("memory.memorize_msg.md", history=history)
        work = Memorizer(agent, memory, area)
        for text in items_of(await agent.call_utility_model(system, message), area):
            await work.add(text)
        result = {"area": area, "saved": work.saved, "removed": work.removed}
        return {**result, "actions": work.actions}, work.writes

    try:
        await atomic(agent, f"memorize_{area}", {"area": area}, effect)
    except InterventionException:
        raise
    except Exception as exc:  # memorizing is a help, never a reason for the turn to fail
        text = agent.mask(f"{type(exc).__name__}: {exc}")
        logger.warning("memorize %s failed: %s", area, json.dumps(text)[:500])
